"""The `attnlab` command line.

    attnlab demo NAME [--out DIR]          train/run a demo, write its pictures and model
                  [--epochs N]           (N ≥ 1; default: the demo's own)
                  [--seed S] [--seeds N] (training seed; N seeds S…S+N−1 and their mean ± sd)
    attnlab analyze FILE                   print the analysis of a saved network
    attnlab analyze FILE.m [--set N=V]...  run a MATLAB script, analyse the networks it builds
    attnlab plot FILE -o PICTURE           draw a saved network or a script's (PNG, SVG or PDF)
    attnlab view FILE [-o PAGE | --serve]  an interactive page of the network and its attention
                  [--set N=V]...           (FILE: a saved network, a demo's folder or FILE.m)
                  [--input SAMPLE]         (+ its attention maps and explanations,
                  [--method M[,M…]]        rollout,lens unless told otherwise)
    attnlab explain FILE --input SAMPLE    a page of what the output rests on for one sample:
                  [--method M[,M…]]        rollout, ig, lens, heads or all (default)
                  [--target CLASS]         (default: the class the network predicts)
                  [-o PAGE]                (FILE: a saved network, a Hugging Face folder or a
                                           demo's folder, whose sample.npz is the default)

FILE may also be a Hugging Face model folder (config.json and model.safetensors, as
`model.save_pretrained(folder)` writes it): it is read with `al.from_pretrained`. A picture or
page of a folder goes beside it by default (FOLDER.png, FOLDER.html).

`analyze` exits with 1 when the network has errors (so it can guard a CI step). A bad argument,
a file that cannot be read or an output that cannot be written is one `error: …` line on stderr
and exit status 2, never a traceback. A saved network with `L.Module` layers needs the
factories of its modules: `--import MODULE` imports a Python module that registers them with
`al.register_module` first.

For a MATLAB script (FILE.m) `analyze`, `plot` and `view` never train: the script runs with its
training, prediction and data statements skipped (each with a note), and the networks shown are
the ones the script builds. `plot -o PICTURE` without an extension writes PICTURE.png.
"""
from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
from pathlib import Path
from typing import Any

from attnlab._version import __version__

DEMOS = {"seed1": "attnlab.cli.demos.seed1", "digits": "attnlab.cli.demos.digits",
         "vowels": "attnlab.cli.demos.vowels", "forecast": "attnlab.cli.demos.forecast",
         "roman": "attnlab.cli.demos.roman", "seed2-images": "attnlab.cli.demos.seed2_images",
         "seed2-sequences": "attnlab.cli.demos.seed2_sequences", "seed3-qkv": "attnlab.cli.demos.seed3_qkv"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="attnlab", description="attention networks as layer graphs")
    ap.add_argument("--version", action="version", version=f"attnlab {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a demo end to end and write its outputs to a folder")
    demo.add_argument("name", choices=sorted(DEMOS))
    demo.add_argument("--out", type=Path, default=Path("demo-out"), metavar="DIR",
                      help="folder for the outputs; the demo writes into DIR/NAME "
                           "(default: demo-out)")
    demo.add_argument("--epochs", default=None, metavar="N",
                      help="training epochs, a whole number ≥ 1 (default: the demo's own, "
                           "which reaches the accuracy in its report)")
    demo.add_argument("--seed", type=int, default=None, metavar="S",
                      help="training seed (default: the demo's own); recorded in metrics.json")
    demo.add_argument("--seeds", type=int, default=1, metavar="N",
                      help="run N seeds (S, S+1, …), each in DIR/NAME/seed-S/, and write their "
                           "mean ± sd to DIR/NAME/metrics.json")

    analyze = sub.add_parser("analyze", help="print the analysis of a saved network "
                             "(exit status 1 when it has errors)")
    analyze.add_argument("file", type=Path, help="a network written by net.save(), a "
                         "Hugging Face model folder, or a MATLAB script (.m)")
    analyze.add_argument("--width", type=int, default=120, help="table width in characters")
    _imports(analyze)
    _sets(analyze)

    plot = sub.add_parser("plot", help="draw a saved network")
    plot.add_argument("file", type=Path, help="a network written by net.save(), a Hugging "
                      "Face model folder, or a MATLAB script (.m)")
    plot.add_argument("-o", "--out", type=Path, default=None,
                      help="picture to write (.png, .svg or .pdf; default: FILE with .png)")
    plot.add_argument("--direction", choices=("TB", "LR"), default="TB",
                      help="top-down (TB, default) or left to right (LR)")
    plot.add_argument("--no-sizes", action="store_true", help="leave out the activation sizes")
    plot.add_argument("--dpi", type=int, default=130)
    _imports(plot)
    _sets(plot)

    view = sub.add_parser("view", help="write (or serve) an interactive page of a network and "
                          "its attention")
    view.add_argument("file", type=Path, help="a network written by net.save(), a demo's output "
                      "folder (DIR/NAME of `attnlab demo NAME --out DIR`), a Hugging Face "
                      "model folder, or a MATLAB script (.m)")
    where = view.add_mutually_exclusive_group()
    where.add_argument("-o", "--out", type=Path, default=None,
                       help="page to write (default: FILE with .html; for a folder, view.html in it)")
    where.add_argument("--serve", action="store_true",
                       help="serve the page on 127.0.0.1 and open the browser, until Ctrl-C")
    view.add_argument("--input", type=Path, default=None, metavar="SAMPLE",
                      help="a sample (.npy, .csv, .npz with one array per input name, or .txt "
                           "for a Hugging Face folder with a tokenizer.json) whose attention "
                           "weights and explanations the page shows")
    view.add_argument("--method", default="rollout,lens", metavar="METHODS",
                      help="the explanations of the sample: rollout, ig, lens, heads, all or "
                           "none; several separated by commas (default rollout,lens: one run "
                           "of the network each)")
    view.add_argument("--title", default=None, help="the page's title (default: the file name)")
    view.add_argument("--port", type=int, default=0, help="with --serve: the port (default: a free one)")
    view.add_argument("--timeout", type=float, default=3600.0,
                      help="with --serve: stop after this many seconds (default 3600)")
    view.add_argument("--no-browser", action="store_true", help="with --serve: do not open a browser")
    _imports(view)
    _sets(view)

    explain = sub.add_parser("explain", help="write a page of what a network's output rests on "
                             "for one sample: attributions, logit lens, head ablation")
    explain.add_argument("file", type=Path, help="a network written by net.save(), a Hugging "
                         "Face model folder, or a demo's output folder")
    explain.add_argument("--input", type=Path, default=None, metavar="SAMPLE",
                         help="the sample explained: .npy; .npz, one array per input name "
                              "(`labels:NAME` arrays hold tokens); .csv, a row per time step; or "
                              ".txt, text for a Hugging Face folder with a tokenizer.json; a "
                              "demo's folder has its own")
    explain.add_argument("--method", default="all", metavar="METHODS",
                         help="rollout (attention rollout), ig (integrated gradients), lens "
                              "(logit lens, causal language models), heads (head ablation) or "
                              "all (default: those that apply); several separated by commas")
    explain.add_argument("--target", type=int, default=None, metavar="CLASS",
                         help="the class (token id) explained, at the last position of a "
                              "sequence output (default: the one the network predicts)")
    explain.add_argument("--steps", type=int, default=64,
                         help="integrated gradients' steps from the baseline (default 64)")
    explain.add_argument("-o", "--out", type=Path, default=None,
                         help="page to write (default: FILE with .explain.html)")
    explain.add_argument("--title", default=None, help="the page's title (default: the file name)")
    _imports(explain)

    args = ap.parse_args(argv)
    try:
        problem = _check_arguments(args)
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
        if args.command == "view":
            return _view(args)
        if args.command == "explain":
            return _explain(args)
        if args.command == "demo":
            return _demo(args)
        return _on_file(args)
    except OSError as e:                  # a file or folder that cannot be read or written
        print(f"error: {_os_error(e, getattr(args, 'file', None))}", file=sys.stderr)
        return 2


def _os_error(e: OSError, fallback: Path | None = None) -> str:
    """An OSError in words: the file it is about (or `fallback`, the file being read), and why."""
    where = e.filename if e.filename else fallback
    return (f"'{where}': " if where else "") + f"{e.strerror or e}"


def _check_arguments(args) -> str | None:
    """The first argument that cannot work, as the message of an `error:` line, or None.
    Checked before any work, so a long run never fails at its end on an argument."""
    cmd = args.command
    if cmd in ("analyze", "plot", "view", "explain"):
        f = args.file
        if not f.exists():
            return f"no such file: {f}"
        if cmd == "explain" and f.suffix.lower() == ".m" and not f.is_dir():
            return (f"'{f}' is a MATLAB script: explain runs a network with its weights; save "
                    "the trained network (net.save) and explain that file")
        if f.is_dir() and not _hugging_face_folder(f) and \
                (cmd not in ("view", "explain") or f.suffix.lower() == ".m"):
            return (f"'{f}' is a folder without a config.json; give a network file (written by "
                    "net.save()), a Hugging Face model folder (config.json and "
                    "model.safetensors), or a MATLAB script (.m)"
                    + (", or a demo's output folder" if cmd in ("view", "explain") else ""))
        if not f.is_dir() and not f.is_file():
            return f"'{f}' is not a regular file (a device or a pipe); give a network file or a .m script"
        if not os.access(f, os.R_OK) or f.is_dir() and not os.access(f, os.X_OK):
            return f"cannot read '{f}': permission denied"
    if cmd == "analyze" and args.width < 40:
        return f"--width must be at least 40 characters, received {args.width}"
    if cmd == "plot" and not 1 <= args.dpi <= 1200:
        return f"--dpi must be a whole number in 1…1200, received {args.dpi} (e.g. --dpi 130)"
    if cmd in ("view", "explain"):
        problem = _sample_problem(args)
        if problem:
            return problem
    if cmd == "explain" and not 1 <= args.steps <= 4096:
        return f"--steps must be a whole number in 1…4096, received {args.steps} (e.g. --steps 64)"
    if cmd == "view":
        if not 0 <= args.port <= 65535:
            return f"--port must be in 0…65535 (0: a free one), received {args.port}"
        if not (math.isfinite(args.timeout) and args.timeout > 0):
            return (f"--timeout must be a positive number of seconds, received {args.timeout:g} "
                    "(e.g. --timeout 600)")
    if cmd == "demo":
        return _folder_problem(args.out / args.name, "--out")
    if getattr(args, "sets", None) and (args.file.suffix.lower() != ".m" or
                                        args.file.is_dir()):
        return (f"--set gives workspace variables to a MATLAB script (.m); '{args.file}' is a "
                "saved network, which has none. Drop --set.")
    return None


def _sample_problem(args) -> str | None:
    """Why --input or --method cannot work (view, explain), or None."""
    from attnlab.core.errors import ArgumentError
    from attnlab.viz.page_explain import parse_methods
    if args.input is not None:
        if not args.input.exists():
            return f"--input: no such file: {args.input}"
        if not args.input.is_file():
            return f"--input: '{args.input}' is not a regular file; give a .npy, .npz, .csv or .txt file"
    elif args.command == "explain" and not (args.file.is_dir() and
                                            not _hugging_face_folder(args.file)):
        return ("explain needs the sample to explain: --input SAMPLE (.npy, .csv, or .npz with one "
                "array per input name, e.g. input_ids for a Hugging Face model)")
    try:
        parse_methods(args.method)
    except ArgumentError as e:
        return str(e)
    if args.command == "explain" and args.method.strip().lower() == "none":
        return "--method none leaves nothing to explain; choose rollout, ig, lens, heads or all"
    return None


def _hugging_face_folder(path: Path) -> bool:
    """A Hugging Face model folder: config.json in it (from_pretrained checks the rest)."""
    return path.is_dir() and (path / "config.json").is_file()


def _beside(path: Path, suffix: str) -> Path:
    """The default output for `path`: a file's with `suffix` instead of its own, a folder's
    beside it (FOLDER.png)."""
    return path.with_name(path.name + suffix) if path.is_dir() else path.with_suffix(suffix)


def _read_network(path: Path):
    """A saved network, or a Hugging Face model folder read with `al.from_pretrained`."""
    if _hugging_face_folder(path):
        from attnlab.pretrained import from_pretrained
        return from_pretrained(path)
    from attnlab.io import load
    return load(path)


def _folder_problem(folder: Path, option: str) -> str | None:
    """Why `folder` cannot be created or written to (its nearest existing ancestor decides)."""
    for p in (folder, *folder.parents):
        if not p.exists():
            if p.is_symlink():
                return f"{option}: '{p}' is a broken symbolic link"
            continue
        if not p.is_dir():
            return (f"{option}: cannot write into '{folder}': '{p}' is a file, not a folder. "
                    "Give a folder, e.g. --out demo-out")
        if not os.access(p, os.W_OK | os.X_OK):
            return f"{option}: cannot write into '{folder}': '{p}' is not writable"
        return None
    return None


def _output_file(path: Path, who: str, formats: tuple[str, ...], example: str,
                 default_suffix: str | None = None) -> Path:
    """An output file once it is known to be writable: not a folder, not a device or other
    special file, in a folder that exists, with a known extension. `default_suffix` is
    added to a name without one (so the file written is the file reported)."""
    from attnlab.core.files import output_path
    from attnlab.core.errors import ArgumentError
    candidates = [path]
    if default_suffix and not path.suffix and path.name:
        candidates.append(path.with_name(path.name + default_suffix))
    for candidate in candidates:
        if candidate.is_symlink() and not candidate.exists():
            raise ArgumentError(f"{who}: '{candidate}' is a broken symbolic link (to "
                                f"'{os.readlink(candidate)}'); give another file name or "
                                "remove the link.")
        if candidate.is_dir():
            raise ArgumentError(f"{who}: '{candidate}' is a folder; give a file name inside "
                                f"it, e.g. '{candidate / example}'.")
        if candidate.exists() and not candidate.is_file():
            raise ArgumentError(f"{who}: '{candidate}' is not a regular file (a device, a pipe "
                                f"or a socket); give a file name such as '{example}'.")
        path = candidate
    out = output_path(path, who, formats, example=example)
    if out.exists() and not os.access(out, os.W_OK) or \
            not out.exists() and not os.access(out.parent, os.W_OK | os.X_OK):
        raise ArgumentError(f"{who}: cannot write '{out}': permission denied. Give a file in "
                            "a folder you can write to.")
    return out


def _demo(args) -> int:
    """Checks the arguments and the data extra before any work, then runs the demo; a missing
    package or an attnlab error is one line on stderr (exit 2), not a traceback."""
    from attnlab.cli.demos import _common
    from attnlab.core.errors import AttnlabError

    epochs = _epochs(args.epochs)
    if isinstance(epochs, str):
        print(f"error: {epochs}", file=sys.stderr)
        return 2
    missing = _common.missing_data_packages(args.name)
    if missing:
        print(f"error: {_common.data_extra_message(args.name, missing)}", file=sys.stderr)
        return 2
    import matplotlib
    matplotlib.use("Agg")
    try:
        from attnlab.cli.demos import seeds
        seeds.run(DEMOS[args.name], args.name, args.out / args.name, epochs=epochs,
                  seed=args.seed, seeds=args.seeds)
    except AttnlabError as e:             # MissingDataPackageError among them
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:                  # the outputs could not be written (disk full, …)
        print(f"error: demo {args.name}: cannot write its outputs to {args.out / args.name}: "
              f"{_os_error(e)}", file=sys.stderr)
        return 2
    except ImportError as e:
        top = (e.name or "").partition(".")[0]
        if top not in _common.DATA_PACKAGES:
            raise                             # not the data extra: a real bug, keep its traceback
        print(f"error: {_common.data_extra_message(args.name, [top])}", file=sys.stderr)
        return 2
    return 0


def _epochs(text):
    """--epochs as an int ≥ 1 (None: the demo's default), or the error message."""
    if text is None:
        return None
    try:
        n = int(text)
    except ValueError:
        return f"--epochs must be a whole number ≥ 1, received {text!r}"
    if n < 1:
        return f"--epochs must be a whole number ≥ 1, received {n} (leave it out for the demo's default)"
    return n


def _imports(parser):
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                        help="import this Python module first (e.g. one that defines layer types "
                             "or registers Module factories); may be repeated")


def _sets(parser):
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="NAME=VALUE",
                        help="for a .m script: a workspace variable it uses undefined, as a "
                             "MATLAB literal (8, \"[28 28 1]\", '\"adam\"'); may be repeated")


def _import_modules(names: list[str]) -> bool:
    """`--import MODULE`s (they register Module factories); False once the error is printed."""
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as e:
            print(f"error: --import {e.name or name}: {e}", file=sys.stderr)
            return False
        except Exception as e:            # the module itself failed: its error, in one line
            print(f"error: --import {name}: importing it raised {type(e).__name__}: {e}",
                  file=sys.stderr)
            return False
    return True


def _matlab_outputs(path: Path):
    """The script's folder as the one it may write to; analyze never trains, so a training
    path outside it is a note (what run_file would refuse) rather than an error."""
    from attnlab.matlab.confinement import script_outputs
    return script_outputs(path.parent, "run_file", lambda *a, **k: None, analyze=True)


def _on_file(args) -> int:
    from attnlab.core.errors import AttnlabError

    out = None
    if args.command == "plot":
        try:
            out = _output_file(args.out or _beside(args.file, ".png"), "plot -o",
                               _picture_formats(), "net.png", default_suffix=".png")
        except AttnlabError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    if args.file.suffix.lower() == ".m" and not args.file.is_dir():   # attnlab.matlab.cli
        if not _import_modules(args.imports):
            return 2
        from attnlab.matlab import cli as matlab_cli
        try:
            with _matlab_outputs(args.file):
                if args.command == "analyze":
                    return matlab_cli.analyze(args.file, args.sets, width=args.width)
                return matlab_cli.plot(args.file, args.sets, out, direction=args.direction,
                                       sizes=not args.no_sizes, dpi=args.dpi)
        except AttnlabError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2

    if not _import_modules(args.imports):
        return 2
    try:
        net = _read_network(args.file)
    except FileNotFoundError:
        print(f"error: no such file: {args.file}", file=sys.stderr)
        return 2
    except AttnlabError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.command == "analyze":
        analysis = net.analyze()
        print(f"{args.file}: {len(net.layers)} layers, inputs {', '.join(net.input_names) or '-'}, "
              f"outputs {', '.join(net.output_names) or '-'}"
              + ("" if net.initialized else " (no weights saved)"))
        if net.metadata:
            print("metadata: " + ", ".join(f"{k}={_short(v)}" for k, v in net.metadata.items()))
        print(analysis.table(width=args.width), end="")
        return 0 if analysis.ok else 1
    import matplotlib
    matplotlib.use("Agg")
    try:
        net.plot(out, direction=args.direction, sizes=not args.no_sizes, dpi=args.dpi)
    except AttnlabError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


def _picture_formats() -> tuple[str, ...]:
    from attnlab.viz.graph import _PICTURE_FORMATS
    return _PICTURE_FORMATS


def _view(args) -> int:
    """`attnlab view`: 0 page written (or served), 2 file or sample unreadable, output not
    writable. A network with errors still gets its page (that is what the page is for): its
    issues are in it. A MATLAB script is read as `analyze` reads it: it never trains."""
    from attnlab.core.errors import AttnlabError

    if not _import_modules(args.imports):
        return 2
    import matplotlib
    matplotlib.use("Agg")
    from attnlab.viz import view as V
    from attnlab.viz.page_explain import parse_methods

    extra: dict[str, Any] = {"sample": None, "labels": {}, "training": None, "metrics": None,
                             "images": {}}
    notes: list[str] = []
    try:
        if args.file.is_dir() and not _hugging_face_folder(args.file):     # a demo's
            extra = V.read_folder(args.file)
            net_file = extra.pop("model")
            default_out = args.file / "view.html"
        else:
            net_file = args.file
            default_out = _beside(args.file, ".html")
        out = None if args.serve else _output_file(args.out or default_out, "view -o",
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
    return path if _hugging_face_folder(path) else None


def _vocabulary(path: Path, notes: list[str]):
    """A Hugging Face folder's tokenizer vocabulary (id → token), which shows token ids as
    text on a page; None for other files, or with a note when it cannot be read."""
    if not _hugging_face_folder(path):
        return None
    from attnlab.viz.samples import read_vocabulary
    vocabulary, note = read_vocabulary(path)
    if note:
        notes.append(note)
    return vocabulary


def _explanation_notes(data: dict) -> list[str]:
    """The explanations a page leaves out, and why (a method that does not apply)."""
    return list((data.get("explanations") or {}).get("notes", []))


def _explain(args) -> int:
    """`attnlab explain`: 0 page written, 2 file, sample, method or output unusable. The
    methods the user names must all work; `all` leaves out those that do not apply (noted)."""
    from attnlab.core.errors import AttnlabError, NetworkError
    from attnlab.viz import view as V
    from attnlab.viz.page_explain import parse_methods

    if not _import_modules(args.imports):
        return 2
    import matplotlib
    matplotlib.use("Agg")
    methods = parse_methods(args.method)
    strict = "all" not in args.method.lower()
    extra: dict[str, Any] = {"sample": None, "labels": {}}
    notes: list[str] = []
    try:
        if args.file.is_dir() and not _hugging_face_folder(args.file):     # a demo's
            folder = V.read_folder(args.file)
            net_file = folder["model"]
            extra = {"sample": folder["sample"], "labels": folder["labels"]}
            default_out = args.file / "explain.html"
        else:
            net_file, default_out = args.file, _beside(args.file, ".explain.html")
        out = _output_file(args.out or default_out, "explain -o", ("html", "htm"),
                           "page.html")
        net = _read_network(Path(net_file))
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
        with _matlab_outputs(path):
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
    return _read_network(path)


def _short(value, n: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 1] + "…"


if __name__ == "__main__":
    sys.exit(main())
