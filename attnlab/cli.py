"""The `attnlab` command line."""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

DEMOS = {"seed1": "attnlab.demos.seed1"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="attnlab", description="attention networks as layer graphs")
    sub = ap.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a demo end to end and write its outputs to a folder")
    demo.add_argument("name", choices=sorted(DEMOS))
    demo.add_argument("--out", type=Path, default=Path("demo-out"))
    demo.add_argument("--epochs", type=int, default=None)
    args = ap.parse_args(argv)
    if args.command == "demo":
        import matplotlib
        matplotlib.use("Agg")
        module = importlib.import_module(DEMOS[args.name])
        module.run(args.out / args.name, epochs=args.epochs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
