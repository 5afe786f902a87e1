"""Hugging Face checkpoints as attnlab networks: `from_pretrained` and `save_pretrained`.

`from_pretrained(folder)` reads a model folder as `transformers` writes it (`config.json` and
`model.safetensors`, or the shards `model.safetensors.index.json` lists), builds the model its
config describes as an `al.Network` of attnlab layers, and copies the weights in. Nothing is
downloaded and nothing is unpickled; the loader needs safetensors and json only.
`save_pretrained(net, folder)` writes the same layout back, tensor for tensor.

One family, one description
---------------------------
`FAMILIES` maps a config's `model_type` to the family that builds it: the name of a module of
this package (its ``FAMILY``), or a family given to `register_family`. A family is a
description (a `builder.Family`, whose fields say what the config maps to; `gpt2.py`,
`llama.py`, `t5.py`, … are one each, T5's with a `builder.Decoder`), which one builder
(`build.py`) turns into a graph; the loader reads it through these parts (any object that has
them is a family too, as `t5_encoder.py`, which cuts T5's encoder out):

- ``KEYS``: a `config.Keys` saying what it does with each key of its transformers config class
  (reads it, builds it at one value only — any other is refused —, or knows it leaves the model
  unchanged);
- ``ARCHITECTURES``: the model classes it builds (`architectures[0]` of the config), the base
  model last; a config without `architectures` gets the first whose tensors the file holds;
- ``IGNORED_TENSORS``: name endings of tensors older files hold that are not weights (buffers
  such as GPT-2's causal mask ``.attn.bias``), or ``()``;
- ``PREFIX`` (optional): where the base model's tensors sit in a head model's file
  ("transformer." for GPT-2): a file saved from the base model, without it, loads into the head
  model (and the reverse), as in transformers, and is written back with its own names;
- ``network(cfg, architecture) -> Network``: the graph, layers named after the checkpoint's
  modules (``h.0.attn``), inputs named like the model's forward arguments;
- ``weights(cfg, architecture) -> list[Weight]``: the table of the checkpoint's tensors and the
  learnables each fills (`weights.W`).

The loader does the rest for every family: it checks the config's keys, that the table fills
each learnable exactly once, every tensor's name and shape (before reading any), the dtype, and
keeps what `save_pretrained` needs in ``net.metadata["huggingface"]`` (so it survives
`net.save` / `al.load`).
"""
from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

import torch

from attnlab.core.errors import ArgumentError, close_matches
from .config import CONFIG_FILE, DTYPES, Config, CheckpointError, Keys, file_problem, keys
from .checkpoint import Checkpoint
from .weights import (W, Weight, check_counts, check_sizes, load, no_random_init,
                      small_table)
from .saving import write_pretrained
from .builder import Decoder, Family, Names

# model_type → the module of this package that builds it, or a registered family
FAMILIES: dict[str, Any] = {
    "gpt2": "gpt2",
    "bert": "bert",
    "roberta": "roberta",
    "distilbert": "distilbert",
    "vit": "vit",
    "llama": "llama",
    "mistral": "mistral",
    "t5": "t5_encoder",          # t5.py's encoder–decoder, and T5EncoderModel
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "gemma": "gemma",
    "gemma2": "gemma2",
    "gpt_neox": "gpt_neox",
    "opt": "opt",
    "phi3": "phi3",
    "mixtral": "mixtral",
}

META_KEY = "huggingface"

__all__ = ["from_pretrained", "save_pretrained", "register_family", "Family", "Decoder", "Names",
           "FAMILIES", "Config", "CheckpointError", "Keys", "keys", "W", "Weight", "Checkpoint"]


def register_family(model_type: str, family: Any) -> None:
    """Adds a model family from outside the package: `from_pretrained` then reads folders
    whose config.json says this `model_type` (and `save_pretrained` writes them back).

    Parameters
    ----------
    model_type : str
        The config's `model_type` (e.g. "qwen2"); a family already there is replaced.
    family : Family, or callable
        A description like the package's own (`al.pretrained.Family`, often
        ``dataclasses.replace(al.pretrained.llama.FAMILY, ...)``), or a callable that gets the
        folder's `Config` (its `data`, and `where`: the path of its config.json) and returns
        the loaded `Network`; `save_pretrained` writes such a network when it carries the
        layout of a described family (e.g. it was loaded through one).
    """
    if not isinstance(model_type, str) or not model_type:
        raise ArgumentError(f"register_family(model_type): expected a non-empty str such as "
                            f"\"qwen2\", received {model_type!r}.")
    if not _described(family) and not callable(family):
        raise ArgumentError(f"register_family(family) for \"{model_type}\": expected a "
                            "description (al.pretrained.Family) or a callable that gets the "
                            f"config and returns the loaded Network, received "
                            f"{type(family).__name__}.")
    FAMILIES[model_type] = family


def family(model_type: Any, where: str = CONFIG_FILE) -> Any:
    """The family that builds `model_type` (a key of `FAMILIES`): a description, a module of
    this package, or a registered loading function."""
    if not isinstance(model_type, str) or model_type not in FAMILIES:
        shown = json.dumps(model_type) if model_type is not None else "missing"
        raise CheckpointError(f"'{where}' key \"model_type\" is {shown}: attnlab builds "
                              f"{', '.join(sorted(FAMILIES))}. Nothing was loaded.")
    found = FAMILIES[model_type]
    if not isinstance(found, str):
        return found
    module = importlib.import_module(f"{__name__}.{found}")
    return getattr(module, "FAMILY", module)


def _described(fam: Any) -> bool:
    """Whether `fam` describes its graph and table (else it is a loading function)."""
    return all(hasattr(fam, part) for part in
               ("ARCHITECTURES", "KEYS", "IGNORED_TENSORS", "network", "weights"))


def from_pretrained(path: str | os.PathLike, dtype: torch.dtype | str | None = None) -> Any:
    """A Hugging Face model folder as an `al.Network` of attnlab layers.

    Parameters
    ----------
    path : str or path
        The folder `model.save_pretrained(path)` wrote: `config.json` and `model.safetensors`
        (or the shards `model.safetensors.index.json` lists). Nothing is downloaded.
    dtype : torch.dtype or str, optional
        The learnables' dtype: a floating torch dtype (``torch.bfloat16``), its name
        ("bfloat16", "float16", "float32", "float64"), or "auto" — as transformers reads
        "auto", the config's `dtype` / `torch_dtype`, else the dtype of the file's tensors;
        None is "auto" too. Token ids stay integers.

    Returns
    -------
    Network
        In evaluation mode. Inputs named like the model's forward arguments (`input_ids`,
        `token_type_ids`, `pixel_values`), outputs `logits` (or, for a base model,
        `last_hidden_state` and `pooler_output`).

    Raises
    ------
    CheckpointError
        A folder without config.json or safetensors (a pickle checkpoint is refused), a
        `model_type`, architecture or config option attnlab does not build (named, with what is
        supported), a missing or mismatched weight (its name and both shapes).
    """
    folder = _folder(path)
    dtype = dtype_argument(dtype, "from_pretrained")
    cfg = Config.from_folder(folder)
    fam = family(cfg.model_type, cfg.where)
    if not _described(fam):
        return _loaded(fam, cfg, dtype)
    with Checkpoint(folder) as ckpt:          # headers only, every file checked first
        arch = _architecture(cfg, fam, ckpt)
        cfg.check_keys(fam.KEYS)
        prefix = getattr(fam, "PREFIX", "")
        # the files bound the work, not the config: its counts are checked against the
        # tensors' names before a table or graph of that size is built, its sizes against
        # their shapes before a learnable is allocated
        check_counts(fam.weights, cfg, arch, ckpt, prefix)
        table = fam.weights(cfg, arch)
        net = fam.network(cfg, arch)
        check_sizes(net, table, ckpt, str(cfg.model_type), prefix, cfg)
        with no_random_init(), torch.random.fork_rng(devices=[]):
            net.initialize()
        net.to(dtype or cfg.dtype or _file_dtype(ckpt))
        record = load(net, table, ckpt, str(cfg.model_type), tuple(fam.IGNORED_TENSORS),
                      prefix, cfg)
    net.eval()
    net.metadata[META_KEY] = {"config": cfg.data, "architecture": arch, "tensors": record,
                              "labels": _labels(fam, arch), "generation": _generation(folder)}
    return net


def save_pretrained(net: Any, path: str | os.PathLike,
                    dtype: torch.dtype | str | None = None) -> None:
    """Writes a network that came from `from_pretrained` back in the Hugging Face layout:
    `config.json` and `model.safetensors` in `path` (the folder is made), with the tensor
    names, dtypes and shapes of the original file, so that `transformers` loads it and
    computes what the network computes.

    Parameters
    ----------
    net : Network
        From `from_pretrained` (also after `net.save` / `al.load`), trained or edited. Edits
        that config.json can say are written into it: a classifier with another number of
        labels (`num_labels`, `id2label` — the names in ``net.metadata["class_labels"]``
        where training left them), blocks removed from the end (`n_layer`,
        `num_hidden_layers`, …), another vocabulary (`vocab_size`), an output projection
        tied or untied (`tie_word_embeddings`). Any other difference from the family's
        layout is refused.
    path : str or path
        The folder to write. Its other files (tokenizer, README, generation_config.json) stay;
        config.json and model.safetensors change together, and the index and shards of an
        earlier sharded save are removed with the old weights.
    dtype : torch.dtype or str, optional
        The tensors' dtype in the file (a floating torch dtype or its name, "bfloat16", …),
        written into config.json as well; None: the network's own (a network loaded, or cast,
        to bfloat16 is written in bfloat16).

    Raises
    ------
    CheckpointError
        The network differs from what its family's config.json can describe (each difference
        named); nothing is written. `net.save(path)` keeps any network in attnlab's format.
    ArgumentError
        Not a network from `from_pretrained`, a path that is no folder, a folder that cannot
        be written (named, with the fix).
    """
    write_pretrained(net, path, dtype_argument(dtype, "save_pretrained", auto=False), family,
                     META_KEY)


# -- helpers ---------------------------------------------------------------------------------

def dtype_argument(dtype: Any, who: str, auto: bool = True) -> torch.dtype | None:
    """The `dtype` argument as a floating torch dtype, or None for the checkpoint's own
    (None, or "auto" where `auto`): a torch dtype, or its name as transformers writes it in
    config.json. Anything else is refused, naming what is accepted."""
    if dtype is None or (auto and isinstance(dtype, str) and dtype == "auto"):
        return None
    if isinstance(dtype, str) and dtype.removeprefix("torch.") in DTYPES:
        return DTYPES[dtype.removeprefix("torch.")]
    if isinstance(dtype, torch.dtype) and dtype.is_floating_point:
        return dtype
    names = (['"auto"'] if auto else []) + [f'"{n}"' for n in DTYPES]
    hint = close_matches(dtype, list(DTYPES) + (["auto"] if auto else [])) \
        if isinstance(dtype, str) else ""
    raise ArgumentError(f"{who} dtype: expected {', '.join(names)} or a floating torch dtype "
                        f"such as torch.bfloat16, received {dtype!r}.{hint}")


def _generation(folder: Path) -> dict:
    """The folder's generation_config.json, `al.generate`'s defaults ({} without one)."""
    from .config import read_json
    path = folder / "generation_config.json"
    problem = file_problem(path)
    if problem == "missing":
        return {}
    if problem is not None:
        raise CheckpointError(f"'{path}' is {problem}, not a regular file: nothing was read "
                              "from it. Remove it, or save the generation config as a file.")
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise CheckpointError(f"'{path}' holds {type(doc).__name__}, not a JSON object of "
                              "generation settings. Fix the file, or remove it.")
    return doc


def _labels(fam: Any, architecture: str) -> str:
    """How a Hugging Face batch's `labels` meet the model's logits: "next-token" for a causal
    LM (transformers' loss scores each step's logits against the next step's label),
    "aligned" for the others (one label per logit, as given)."""
    heads = getattr(fam, "heads", {})
    return "next-token" if heads.get(architecture) == "lm" else "aligned"


def _folder(path) -> Path:
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise ArgumentError(f"from_pretrained(path): expected a model folder (str or "
                            f"pathlib.Path), received {type(path).__name__} {repr(path)[:60]}.")
    p = Path(path)
    if not p.is_dir():
        problem = file_problem(p)           # stat'ed only: nothing there is opened
        what = "is a file" if problem is None else "does not exist" if problem == "missing" \
            else f"is {problem}"
        raise ArgumentError(f"from_pretrained(path): '{p}' {what}: give the folder that "
                            "model.save_pretrained(folder) wrote (config.json and "
                            "model.safetensors). attnlab downloads nothing: fetch a model "
                            "with huggingface_hub.snapshot_download first.")
    return p


def _loaded(load_family: Any, cfg: Config, dtype: torch.dtype | None) -> Any:
    """A registered loading function's network, in evaluation mode and `dtype`."""
    from ..network import Network
    net = load_family(cfg)
    if not isinstance(net, Network):
        raise CheckpointError(f"the family registered for model_type \"{cfg.model_type}\" "
                              f"returned {type(net).__name__}, not an al.Network: give "
                              "register_family a callable that returns the loaded network.")
    if dtype is not None:
        net.to(dtype)
    return net.eval()


def _architecture(cfg: Config, fam: Any, ckpt: Checkpoint) -> str:
    supported = tuple(fam.ARCHITECTURES)
    arch = cfg.architecture
    if arch is not None:
        if arch not in supported:
            raise CheckpointError(f"'{cfg.where}' key \"architectures\" is [\"{arch}\"]: attnlab "
                                  f"builds the {cfg.model_type} models {', '.join(supported)}. "
                                  "Nothing was loaded.")
        return arch
    for arch in supported:             # no "architectures": the first whose tensors are there
        table, _ = small_table(fam.weights, cfg, arch)      # (its first block: counts come next)
        if all(ckpt.find(w.name, getattr(fam, "PREFIX", "")) for w in table
               if not w.tied and not w.zero):
            return arch
    return supported[-1]                # the loader then names the missing tensors


def _file_dtype(ckpt: Checkpoint) -> torch.dtype:
    return next((d for _, d in ckpt.header.values() if d.is_floating_point), torch.float32)
