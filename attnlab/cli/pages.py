"""The page commands of the command line: `attnlab view` (a network's interactive page, with
its attention and explanations for a sample) and `attnlab explain` (the explanations' page
for one sample). `attnlab.cli.main` parses their arguments and calls them."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from attnlab.cli.files import (beside, hugging_face_folder, import_modules, matlab_outputs,
                               output_file, read_network)


def view(args) -> int:
    """`attnlab view`: 0 page written (or served), 2 file or sample unreadable, output not
    writable. A network with errors still gets its page (that is what the page is for): its
    issues are in it. A MATLAB script is read as `analyze` reads it: it never trains."""
    from attnlab.core.errors import AttnlabError

    if not import_modules(args.imports):
        return 2
    import matplotlib
    matplotlib.use("Agg")
    from attnlab.viz import view as V
    from attnlab.viz.page_explain import parse_methods

    extra: dict[str, Any] = {"sample": None, "labels": {}, "training": None, "metrics": None,
                             "images": {}}
    notes: list[str] = []
    try:
        if args.file.is_dir() and not hugging_face_folder(args.file):     # a demo's
            extra = V.read_folder(args.file)
            net_file = extra.pop("model")
            default_out = args.file / "view.html"
        else:
            net_file = args.file
            default_out = beside(args.file, ".html")
        out = None if args.serve else output_file(args.out or default_out, "view -o",
                                                   ("html", "htm"), "net.html")
        net = _view_network(Path(net_file), args.sets, notes)
        if args.input is not None:
            extra["sample"], extra["labels"] = V.read_sample(args.input, _model_folder(args.file))
        methods = parse_methods(args.method) if extra["sample"] is not None else ()
        vocabulary = _vocabulary(args.file, notes) if extra["sample"] is not None else None
        data = V.page_data(net, title=args.title or args.file.name, methods=methods,
                           vocabulary=vocabulary, **extra)
        page = V.render_html(data)
    except FileNotFoundError:
        print(f"error: no such file: {args.file}", file=sys.stderr)
        return 2
    except AttnlabError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for note in notes + _explanation_notes(data):
        print(f"note: {note}")
    if args.serve:
        try:
            server = V.PageServer(page, port=args.port, timeout=args.timeout).start()
        except OSError as e:
            print(f"error: cannot serve on 127.0.0.1:{args.port}: {e.strerror or e}",
                  file=sys.stderr)
            return 2
        except AttnlabError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"serving {args.file} at {server.url} (Ctrl-C stops)", flush=True)
        if not args.no_browser:
            import webbrowser
            webbrowser.open(server.url)
        server.wait()
        return 0
    if out is None:                       # not serving: the page's file was checked above
        raise AttnlabError("view: no page to write (internal: the output was not set)")
    try:
        V.write_page(out, page)
    except OSError as e:
        print(f"error: view -o: cannot write '{out}': {e.strerror or e}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


def _model_folder(path: Path) -> Path | None:
    """The Hugging Face model folder whose tokenizer reads a text sample, or None."""
    return path if hugging_face_folder(path) else None


def _vocabulary(path: Path, notes: list[str]):
    """A Hugging Face folder's tokenizer vocabulary (id → token), which shows token ids as
    text on a page; None for other files, or with a note when it cannot be read."""
    if not hugging_face_folder(path):
        return None
    from attnlab.viz.samples import read_vocabulary
    vocabulary, note = read_vocabulary(path)
    if note:
        notes.append(note)
    return vocabulary


def _explanation_notes(data: dict) -> list[str]:
    """The explanations a page leaves out, and why (a method that does not apply)."""
    return list((data.get("explanations") or {}).get("notes", []))


def explain(args) -> int:
    """`attnlab explain`: 0 page written, 2 file, sample, method or output unusable. The
    methods the user names must all work; `all` leaves out those that do not apply (noted)."""
    from attnlab.core.errors import AttnlabError, NetworkError
    from attnlab.viz import view as V
    from attnlab.viz.page_explain import parse_methods

    if not import_modules(args.imports):
        return 2
    import matplotlib
    matplotlib.use("Agg")
    methods = parse_methods(args.method)
    strict = "all" not in args.method.lower()
    extra: dict[str, Any] = {"sample": None, "labels": {}}
    notes: list[str] = []
    try:
        if args.file.is_dir() and not hugging_face_folder(args.file):     # a demo's
            folder = V.read_folder(args.file)
            net_file = folder["model"]
            extra = {"sample": folder["sample"], "labels": folder["labels"]}
            default_out = args.file / "explain.html"
        else:
            net_file, default_out = args.file, beside(args.file, ".explain.html")
        out = output_file(args.out or default_out, "explain -o", ("html", "htm"),
                           "page.html")
        net = read_network(Path(net_file))
        vocabulary = _vocabulary(args.file, notes)
        if args.input is not None:
            extra["sample"], extra["labels"] = V.read_sample(args.input, _model_folder(args.file))
        if extra["sample"] is None:
            raise AttnlabError(f"{args.file}: the demo's folder has no sample.npz; give one "
                               "with --input SAMPLE")
        analysis = net.analyze()
        if not analysis.ok:
            raise NetworkError(f"{args.file}: the network has errors, so it cannot run on the "
                               "sample; `attnlab analyze` lists them:\n" +
                               "\n".join(f"  {i.message}" for i in analysis.errors))
        data = V.page_data(net, title=args.title or args.file.name, methods=methods,
                           target=args.target, steps=args.steps, strict=strict,
                           vocabulary=vocabulary, **extra)
    except AttnlabError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for note in notes + _explanation_notes(data):
        print(f"note: {note}")
    try:
        V.write_page(out, V.render_html(data, tool="explain"), who="explain -o")
    except OSError as e:
        print(f"error: explain -o: cannot write '{out}': {e.strerror or e}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


def _view_network(path: Path, sets: list[str], notes: list[str]):
    """The network to show: a saved one, or the last network a MATLAB script builds, read
    without training (its notes are added to `notes`)."""
    if path.suffix.lower() == ".m" and not path.is_dir():
        from attnlab.core.errors import FormatError
        from attnlab.matlab import cli as matlab_cli
        with matlab_outputs(path):
            loaded = matlab_cli._load(path, sets)       # (networks, the reader or its notes, …)
        nets = loaded[0]
        notes.extend(getattr(loaded[1], "notes", loaded[1]))
        if not nets:
            raise FormatError(f"{path}: the script makes no network (no dlnetwork, layer graph "
                              "or layer array in its workspace when it ends).")
        return nets[-1][1]
    if sets:
        from attnlab.core.errors import ArgumentError
        raise ArgumentError(f"--set gives workspace variables to a MATLAB script (.m); "
                            f"'{path}' is a saved network, which has none. Drop --set.")
    return read_network(path)
