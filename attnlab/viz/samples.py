"""Reading what a page shows from files: a sample (`.npy`/`.npz`, never unpickled) and a
demo's output folder (model, sample, history, metrics, pictures)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from attnlab.core.errors import DataError


def read_sample(path) -> tuple[dict | np.ndarray, dict]:
    """A sample from `.npy` (one array) or `.npz` (arrays named after the network's inputs;
    arrays named `labels:<input>` hold that input's tokens). Never unpickles."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"--input: no such file: {path}")
    try:
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        elif path.suffix == ".npy":
            arrays = np.load(path, allow_pickle=False)
        else:
            raise DataError(f"--input {path}: expected a .npy or .npz file, received '{path.suffix}'")
    except ValueError as e:         # an object array: would need pickle, which is refused
        raise DataError(f"--input {path}: cannot read it without unpickling ({e}); save numbers "
                        "with np.save / np.savez") from None
    if isinstance(arrays, dict):
        labels = {k.split(":", 1)[1]: [str(s) for s in v.tolist()] for k, v in arrays.items()
                  if k.startswith("labels:")}
        return {k: v for k, v in arrays.items() if not k.startswith("labels:")}, labels
    return arrays, {}


def read_folder(folder) -> dict:
    """What a demo's output folder (`attnlab demo NAME --out DIR` → DIR/NAME) offers the page:
    its model, a sample (`sample.npz`/`sample.npy`), its training history (`history.json`, as
    `page_data`'s `training`), `metrics.json`, and `training-progress.png` when there is no
    history to draw."""
    folder = Path(folder)
    model = folder / "model.attnlab"
    seeds = sorted(folder.glob("seed-*/model.attnlab"))
    if not model.exists() and seeds:           # `attnlab demo NAME --seeds N`: show the first run
        folder, model = seeds[0].parent, seeds[0]
    if not model.exists():
        raise DataError(f"{folder}: not a demo output folder (no model.attnlab in it)")
    out: dict = {"model": model, "sample": None, "labels": {}, "training": None, "metrics": None,
                 "images": {}}
    for name in ("sample.npz", "sample.npy"):
        if (folder / name).exists():
            out["sample"], out["labels"] = read_sample(folder / name)
            break
    if (folder / "history.json").exists():
        out["training"] = json.loads((folder / "history.json").read_text(encoding="utf-8"))
    if (folder / "metrics.json").exists():
        out["metrics"] = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
    if out["training"] is None and (folder / "training-progress.png").exists():
        out["images"]["training-progress.png"] = (folder / "training-progress.png").read_bytes()
    return out

