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
import math
import os
import sys
from pathlib import Path

from attnlab._version import __version__
from attnlab.cli.files import (beside, folder_problem, hugging_face_folder, import_modules,
                               matlab_outputs, output_file, read_network)

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
        if args.command in ("view", "explain"):
            from attnlab.cli import pages        # the page commands, apart: they import viz
            return pages.view(args) if args.command == "view" else pages.explain(args)
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
        if f.is_dir() and not hugging_face_folder(f) and \
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
        return folder_problem(args.out / args.name, "--out")
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
                                            not hugging_face_folder(args.file)):
        return ("explain needs the sample to explain: --input SAMPLE (.npy, .csv, or .npz with one "
                "array per input name, e.g. input_ids for a Hugging Face model)")
    try:
        parse_methods(args.method)
    except ArgumentError as e:
        return str(e)
    if args.command == "explain" and args.method.strip().lower() == "none":
        return "--method none leaves nothing to explain; choose rollout, ig, lens, heads or all"
    return None


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


def _on_file(args) -> int:
    from attnlab.core.errors import AttnlabError

    out = None
    if args.command == "plot":
        try:
            out = output_file(args.out or beside(args.file, ".png"), "plot -o",
                               _picture_formats(), "net.png", default_suffix=".png")
        except AttnlabError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    if args.file.suffix.lower() == ".m" and not args.file.is_dir():   # attnlab.matlab.cli
        if not import_modules(args.imports):
            return 2
        from attnlab.matlab import cli as matlab_cli
        try:
            with matlab_outputs(args.file):
                if args.command == "analyze":
                    return matlab_cli.analyze(args.file, args.sets, width=args.width)
                return matlab_cli.plot(args.file, args.sets, out, direction=args.direction,
                                       sizes=not args.no_sizes, dpi=args.dpi)
        except AttnlabError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2

    if not import_modules(args.imports):
        return 2
    try:
        net = read_network(args.file)
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


def _short(value, n: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 1] + "…"


if __name__ == "__main__":
    sys.exit(main())
