"""T5 (`model_type` "t5"): `T5ForConditionalGeneration`, the encoder–decoder `t5.py` describes,
and `T5EncoderModel`, its encoder alone.

`T5EncoderModel` is the encoder–decoder's graph cut where the decoder reads the encoder: the
layers that feed the cross-attention's keys (the token embedding `shared`, the encoder's
relative position bias and blocks, its final norm), that output named `last_hidden_state`.
Its tensors are the encoder–decoder's under ``shared.`` and ``encoder.``, so a sentence
encoder (a T5EncoderModel checkpoint) and the encoder of a T5ForConditionalGeneration file
build the same layers. Input `input_ids`; padding, from a list of id sequences or
`al.Padded`, plays `attention_mask`.

transformers 5 writes `is_encoder_decoder` false into a T5EncoderModel's config.json, 4.x left
it true: the encoder is built either way; the encoder–decoder needs it true.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from . import t5
from .common import output
from .config import CheckpointError, Config
from .saving import SAYABLE, Sayable
from .weights import Weight

ENCODER = "T5EncoderModel"
ENCODER_DECODER = "T5ForConditionalGeneration"
ENCODER_TENSORS = ("shared.", "encoder.")


def _full() -> Any:
    """t5.py's family: the encoder–decoder's description."""
    return t5.FAMILY


ARCHITECTURES: tuple[str, ...] = tuple(_full().ARCHITECTURES) + (ENCODER,)
KEYS = dataclasses.replace(_full().KEYS, fixed={**_full().KEYS.fixed,
                                                "is_encoder_decoder": (True, False)})
IGNORED_TENSORS: tuple[str, ...] = tuple(_full().IGNORED_TENSORS)


def network(cfg: Config, architecture: str) -> Any:
    if architecture != ENCODER:
        if cfg.data.get("is_encoder_decoder", True) is False:
            raise cfg.unsupported("is_encoder_decoder", False, f"{architecture} is an "
                                  "encoder–decoder: supported: true")
        return _full().network(cfg, architecture)
    return encoder_part(_full().network(cfg, ENCODER_DECODER))


def weights(cfg: Config, architecture: str) -> list[Weight]:
    if architecture != ENCODER:
        return _full().weights(cfg, architecture)
    return [w for w in _full().weights(cfg, ENCODER_DECODER) if w.name.startswith(ENCODER_TENSORS)]


def sayable(architecture: str) -> Sayable:
    """What the config.json can say of an edited network: the encoder–decoder's, and for the
    encoder alone its block count and vocabulary."""
    full = getattr(_full(), "sayable", None) or SAYABLE["t5"]
    if callable(full):
        full = full(ENCODER_DECODER)
    if architecture != ENCODER:
        return full
    blocks = tuple(b for b in full.blocks if b[1].startswith(r"^encoder"))
    return dataclasses.replace(full, blocks=blocks, head=None, head_in_file=None)


def encoder_part(net: Any) -> Any:
    """`net` (the encoder–decoder) cut to the layers that feed the cross-attention's keys, that
    output named `last_hidden_state`."""
    memory = {src for (dst, port), (src, _) in net.sources.items()
              if port == "key" and net.layer_map[dst].type_name == "MultiHeadAttention"}
    if len(memory) != 1:              # the description changed under this module
        raise CheckpointError(f"the t5 graph's cross-attention reads {sorted(memory)}, not "
                              "one encoder output. This is a bug in attnlab's t5 family: "
                              "please report it.")
    keep = _feeding(net, memory)
    net.remove(*[n for n in net.layer_map if n not in keep])
    net.add(output("last_hidden_state"))
    net.connect(memory.pop(), "last_hidden_state")
    return net


def _feeding(net: Any, ends: set[str]) -> set[str]:
    """`ends` and every layer that feeds them, directly or through others."""
    inputs: dict[str, list[str]] = {}
    for (dst, _), (src, _) in net.sources.items():
        inputs.setdefault(dst, []).append(src)
    seen, todo = set(ends), list(ends)
    while todo:
        for src in inputs.get(todo.pop(), ()):
            if src not in seen:
                seen.add(src)
                todo.append(src)
    return seen
