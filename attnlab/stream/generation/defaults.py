"""A checkpoint's generation_config.json as `generate`'s defaults, as transformers' `generate`
takes `model.generation_config`: an argument left out takes the file's value, one given (None
included) overrides it.

`from_pretrained` keeps the file's JSON object in ``net.metadata["huggingface"]
["generation"]``; these are the keys `generate` reads from it, by transformers' names."""
from __future__ import annotations

from typing import Any

from attnlab.core.errors import ArgumentError, DataError


class _Default:
    """An argument left out (None is a value: "none", as in transformers' keyword arguments)."""

    def __repr__(self) -> str:
        return "<the checkpoint's, else transformers' default>"


DEFAULT: Any = _Default()

# generate's argument ← the generation_config.json key it defaults to
KEYS = {"max_new_tokens": "max_new_tokens", "max_length": "max_length",
        "stop": "eos_token_id", "temperature": "temperature", "top_k": "top_k",
        "top_p": "top_p", "min_p": "min_p", "repetition_penalty": "repetition_penalty",
        "no_repeat_ngram_size": "no_repeat_ngram_size", "num_beams": "num_beams",
        "length_penalty": "length_penalty", "early_stopping": "early_stopping"}
LENGTHS = ("max_new_tokens", "max_length")


def generation_config(net) -> dict:
    """The JSON object of the network's generation_config.json ({} when it has none)."""
    meta = getattr(net, "metadata", None)
    record = meta.get("huggingface") if isinstance(meta, dict) else None
    config = record.get("generation") if isinstance(record, dict) else None
    return config if isinstance(config, dict) else {}


def resolve(net, given: dict) -> tuple[dict, set]:
    """`given` (argument → value, DEFAULT where left out) with the checkpoint's values in place
    of DEFAULT (None where the file has none), and the names of the arguments taken from it.
    A length given overrides both of the file's lengths; `strategy` left out is "sample"
    where the file says do_sample, else greedy (None)."""
    config = generation_config(net)
    out, taken = dict(given), set()
    lengths_given = any(given[k] is not DEFAULT for k in LENGTHS)
    for arg, value in given.items():
        if value is not DEFAULT:
            continue
        key = KEYS.get(arg)
        if key is None or key not in config or (arg in LENGTHS and lengths_given):
            out[arg] = None
            continue
        out[arg] = config[key]
        if config[key] is not None:
            taken.add(arg)
    if given.get("strategy", None) is DEFAULT:
        sample = config.get("do_sample")
        out["strategy"] = "sample" if sample is True else None
        if sample not in (None, True, False):
            raise DataError(f"the checkpoint's generation_config.json: 'do_sample' must be true "
                            f"or false, it is {sample!r}. Fix the file, or give strategy= "
                            "to generate.")
    return out, taken


def from_file(error: ArgumentError, taken: set) -> Exception:
    """An argument check that failed on a value from generation_config.json: a DataError
    naming the file's key (the caller raises it); any other error as it is."""
    arg = getattr(error, "argument", None)
    if not isinstance(arg, str) or arg not in taken:
        return error
    return DataError(f"the checkpoint's generation_config.json: '{KEYS[arg]}' (the default of "
                     f"generate's '{arg}') cannot be used: {error} Fix the file, or give "
                     f"{arg}= to generate.")
