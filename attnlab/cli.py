"""The `attnlab` command line.

    attnlab demo NAME [--out DIR]          train/run a demo, write its pictures and model
                  [--epochs N]           (N ≥ 1; default: the demo's own)
                  [--seed S] [--seeds N] (training seed; N seeds S…S+N−1 and their mean ± sd)
    attnlab analyze FILE                   print the analysis of a saved network
    attnlab analyze FILE.m [--set N=V]...  run a MATLAB script, analyse the networks it builds
    attnlab plot FILE -o PICTURE           draw a saved network (PNG, SVG or PDF)
    attnlab view FILE [-o PAGE | --serve]  an interactive page of the network and its attention

`analyze` exits with 1 when the network has errors (so it can guard a CI step), `plot` and
`analyze` with 2 when the file cannot be read. A saved network with `L.Module` layers needs the
factories of its modules: `--import MODULE` imports a Python module that registers them with
`al.register_module` first.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any

from ._version import __version__

DEMOS = {"seed1": "attnlab.demos.seed1", "digits": "attnlab.demos.digits",
         "vowels": "attnlab.demos.vowels", "forecast": "attnlab.demos.forecast",
         "roman": "attnlab.demos.roman"}


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
    analyze.add_argument("file", type=Path, help="a network written by net.save(), or a "
                         "MATLAB script (.m)")
    analyze.add_argument("--width", type=int, default=120, help="table width in characters")
    _imports(analyze)
    _sets(analyze)

    plot = sub.add_parser("plot", help="draw a saved network")
    plot.add_argument("file", type=Path, help="a network written by net.save(), or a MATLAB "
                      "script (.m)")
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
                      "folder (DIR/NAME of `attnlab demo NAME --out DIR`), or a MATLAB script (.m)")
    where = view.add_mutually_exclusive_group()
    where.add_argument("-o", "--out", type=Path, default=None,
                       help="page to write (default: FILE with .html; for a folder, view.html in it)")
    where.add_argument("--serve", action="store_true",
                       help="serve the page on 127.0.0.1 and open the browser, until Ctrl-C")
    view.add_argument("--input", type=Path, default=None, metavar="SAMPLE",
                      help="a sample (.npy, or .npz with one array per input name) whose attention "
                           "weights the page shows")
    view.add_argument("--title", default=None, help="the page's title (default: the file name)")
    view.add_argument("--port", type=int, default=0, help="with --serve: the port (default: a free one)")
    view.add_argument("--timeout", type=float, default=3600.0,
                      help="with --serve: stop after this many seconds (default 3600)")
    view.add_argument("--no-browser", action="store_true", help="with --serve: do not open a browser")
    _imports(view)

    args = ap.parse_args(argv)
    if args.command == "view":
        return _view(args)
    if args.command == "demo":
        return _demo(args)
    return _on_file(args)


def _demo(args) -> int:
    """Checks the arguments and the data extra before any work, then runs the demo; a missing
    package or an attnlab error is one line on stderr (exit 2), not a traceback."""
    from .demos import _common
    from .errors import AttnlabError

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
        from .demos import seeds
        seeds.run(DEMOS[args.name], args.name, args.out / args.name, epochs=epochs,
                  seed=args.seed, seeds=args.seeds)
    except AttnlabError as e:             # MissingDataPackageError among them
        print(f"error: {e}", file=sys.stderr)
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
    try:
        for name in names:
            importlib.import_module(name)
    except ImportError as e:
        print(f"error: --import {e.name or ''}: {e}", file=sys.stderr)
        return False
    return True


def _on_file(args) -> int:
    from .errors import AttnlabError

    if args.file.suffix.lower() == ".m":                 # a MATLAB script: attnlab.matlab.cli
        from .matlab import cli as matlab_cli
        if args.command == "analyze":
            return matlab_cli.analyze(args.file, args.sets, width=args.width)
        return matlab_cli.plot(args.file, args.sets, args.out, direction=args.direction,
                               sizes=not args.no_sizes, dpi=args.dpi)

    if args.sets:
        print(f"error: --set gives workspace variables to a MATLAB script (.m); '{args.file}' is "
              "a saved network, which has none. Drop --set.", file=sys.stderr)
        return 2
    if not _import_modules(args.imports):
        return 2
    try:
        from .io import load
        net = load(args.file)
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
    out = args.out or args.file.with_suffix(".png")
    try:
        net.plot(out, direction=args.direction, sizes=not args.no_sizes, dpi=args.dpi)
    except AttnlabError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


def _view(args) -> int:
    """`attnlab view`: 0 page written (or served), 2 file or sample unreadable. A network with
    errors still gets its page (that is what the page is for): its issues are in it."""
    from .errors import AttnlabError

    if not _import_modules(args.imports):
        return 2
    import matplotlib
    matplotlib.use("Agg")
    from .viz import view as V

    extra: dict[str, Any] = {"sample": None, "labels": {}, "training": None, "metrics": None,
                             "images": {}}
    try:
        if args.file.is_dir():
            extra = V.read_folder(args.file)
            net_file = extra.pop("model")
            default_out = args.file / "view.html"
        else:
            net_file = args.file
            default_out = args.file.with_suffix(".html")
        net = _view_network(net_file)
        if args.input is not None:
            extra["sample"], extra["labels"] = V.read_sample(args.input)
        page = V.page_html(net, title=args.title or args.file.name, **extra)
    except FileNotFoundError:
        print(f"error: no such file: {args.file}", file=sys.stderr)
        return 2
    except AttnlabError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.serve:
        try:
            server = V.PageServer(page, port=args.port, timeout=args.timeout).start()
        except OSError as e:
            print(f"error: cannot serve on 127.0.0.1:{args.port}: {e}", file=sys.stderr)
            return 2
        print(f"serving {args.file} at {server.url} (Ctrl-C stops)", flush=True)
        if not args.no_browser:
            import webbrowser
            webbrowser.open(server.url)
        server.wait()
        return 0
    from ._files import output_path
    try:
        out = output_path(args.out or default_out, "view -o", ("html", "htm"), example="net.html")
    except AttnlabError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out.write_text(page, encoding="utf-8")
    print(f"wrote {out}")
    return 0


def _view_network(path: Path):
    if path.suffix == ".m":
        from . import matlab
        from .errors import FormatError
        if not hasattr(matlab, "run_file"):
            raise FormatError(f"{path}: reading MATLAB scripts needs attnlab.matlab.run_file, "
                              "which this version does not have yet. Save the network with "
                              "net.save() and view that file.")
        workspace = matlab.run_file(path)
        nets = [v for v in workspace.values() if hasattr(v, "_layers") and hasattr(v, "_conns")]
        if not nets:
            raise FormatError(f"{path}: the script makes no network (no dlnetwork or layer graph "
                              "in its workspace).")
        return nets[-1]
    from .io import load
    return load(path)


def _short(value, n: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 1] + "…"


if __name__ == "__main__":
    sys.exit(main())
