"""Reading what a page shows from files: a sample (`.npy`/`.npz`, never unpickled, or `.csv`
text) and a demo's output folder (model, sample, history, metrics, pictures)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from attnlab.core.errors import DataError
from attnlab.core.reading import read_regular

MAX_CSV_BYTES = 64 * 2 ** 20          # a .csv sample is one item: 64 MiB is far more than one


def read_sample(path, model_folder=None) -> tuple[dict | np.ndarray, dict]:
    """A sample from `.npy` (one array), `.npz` (arrays named after the network's inputs;
    arrays named `labels:<input>` hold that input's tokens), `.csv` (one array: a row per
    time step, or one row of features) or `.txt` (text, tokenized by the `tokenizer.json` of
    `model_folder`, a Hugging Face model folder, into `input_ids`). Never unpickles."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"--input: no such file: {path}")
    if path.suffix == ".txt":
        return _text(path, model_folder)
    if path.suffix == ".csv":
        return _csv(path), {}
    try:
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        elif path.suffix == ".npy":
            arrays = np.load(path, allow_pickle=False)
        else:
            raise DataError(f"--input {path}: expected a .npy, .npz, .csv or .txt file, "
                            f"received '{path.suffix}'")
    except ValueError as e:         # an object array: would need pickle, which is refused
        raise DataError(f"--input {path}: cannot read it without unpickling ({e}); save numbers "
                        "with np.save / np.savez") from None
    if isinstance(arrays, dict):
        labels = {k.split(":", 1)[1]: [str(s) for s in v.tolist()] for k, v in arrays.items()
                  if k.startswith("labels:")}
        return {k: v for k, v in arrays.items() if not k.startswith("labels:")}, labels
    return arrays, {}


MAX_TEXT_BYTES = 2 ** 20


def _text(path: Path, model_folder) -> tuple[dict, dict]:
    """A `.txt` sample: its text tokenized by the model folder's `tokenizer.json` (with the
    special tokens it adds, as transformers' tokenizer(text) does), as `input_ids`, the
    tokens as their labels."""
    tokenizer = Path(model_folder) / "tokenizer.json" if model_folder is not None else None
    if tokenizer is None or not tokenizer.is_file():
        raise DataError(f"--input {path}: text needs the tokenizer of the model: a Hugging "
                        "Face model folder with a tokenizer.json"
                        + (f" ('{model_folder}' has none)" if model_folder is not None else "")
                        + ". Give the token ids instead, as .npy or .npz")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise DataError(f"--input {path}: reading text needs the `tokenizers` package "
                        "(pip install tokenizers; transformers installs it), or give the token "
                        "ids as .npy or .npz") from None
    text = _read_text(path, MAX_TEXT_BYTES)
    try:
        encoding = Tokenizer.from_file(str(tokenizer)).encode(text.rstrip("\n"))
    except Exception as e:              # the tokenizers library's own errors: one kind each
        raise DataError(f"--input {path}: {tokenizer} cannot tokenize it: "
                        f"{type(e).__name__}: {e}") from None
    if not encoding.ids:
        raise DataError(f"--input {path}: the text gives no tokens; write the text to explain")
    return ({"input_ids": np.asarray(encoding.ids, dtype=np.int64)},
            {"input_ids": list(encoding.tokens)})


def _csv(path: Path) -> np.ndarray:
    """A `.csv` sample: numbers separated by commas, a row per time step (or one row of an
    item's features); a first row that is not all numbers is a header, and is skipped."""
    text = _read_text(path, MAX_CSV_BYTES, "; a .csv sample is numbers separated by commas")
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise DataError(f"--input {path}: the file has no rows; write one row per time step")
    rows = [line.split(",") for line in lines]
    header = 0 if all(_is_number(f) for f in rows[0]) else 1
    width = None
    for n, fields in enumerate(rows[header:], start=header + 1):
        bad = next((f for f in fields if not _is_number(f)), None)
        if bad is not None:
            raise DataError(f"--input {path}: row {n} has {bad.strip()!r}, not a finite number; a "
                            ".csv sample is numbers separated by commas (a first row of names is "
                            "allowed)")
        if width is None:
            width = len(fields)
        elif len(fields) != width:
            raise DataError(f"--input {path}: row {n} has {len(fields)} fields, expected "
                            f"{width} as in row {header + 1}; give every row (time step) the "
                            "same number of channels")
    return np.array([[float(f) for f in fields] for fields in rows[header:]], dtype=np.float64)


def _read_text(path: Path, max_bytes: int, hint: str = "") -> str:
    """A text sample's contents (UTF-8, a byte-order mark dropped), at most `max_bytes`;
    `hint` follows the refusal of other bytes."""
    raw = read_regular(path, f"--input {path}", max_bytes, error=DataError)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DataError(f"--input {path}: not UTF-8 text (byte {e.start}){hint}") from None


def _is_number(field: str) -> bool:
    """A finite number: NaN or infinity in a sample would make every explanation NaN."""
    try:
        return math.isfinite(float(field))
    except ValueError:
        return False


MAX_TOKENIZER_BYTES = 64 * 2 ** 20


def read_vocabulary(folder) -> tuple[dict | None, str | None]:
    """The tokens of a Hugging Face model folder's `tokenizer.json`, id → token, to show token
    ids as text; and a note when the file is there but cannot be
    read that way (the ids then stay numbers). Only the JSON's vocabulary is read: nothing
    is tokenized. (None, None) without a tokenizer.json."""
    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        return None, None
    raw = read_regular(path, str(path), MAX_TOKENIZER_BYTES, error=DataError)
    try:
        data = json.loads(raw)
    except ValueError as e:
        return None, f"{path} is not JSON ({e}): tokens are shown as ids"
    model = data.get("model") if isinstance(data, dict) else None
    vocab = model.get("vocab") if isinstance(model, dict) else None
    tokens: dict[int, str] = {}
    if isinstance(vocab, dict):                             # BPE, WordPiece: token → id
        tokens = {i: t for t, i in vocab.items() if isinstance(i, int) and i >= 0}
    elif isinstance(vocab, list):                           # Unigram: [token, score] by id
        tokens = {i: e[0] for i, e in enumerate(vocab)
                  if isinstance(e, list) and e and isinstance(e[0], str)}
    for added in data.get("added_tokens") or []:
        if isinstance(added, dict) and isinstance(added.get("id"), int) and added["id"] >= 0 \
                and isinstance(added.get("content"), str):
            tokens[added["id"]] = added["content"]
    if not tokens:
        return None, f"{path} has no vocabulary attnlab can read: tokens are shown as ids"
    return tokens, None


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

