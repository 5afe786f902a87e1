"""What the attention layers share: their options, checked once and kept whole; the heads
and projection sizes; the checks of their sequence, mask and bias ports.

A layer checks its arguments once, when it is made (`rules.options`), and keeps them as one
`AttentionOptions` (`layer.options`) besides its attributes; an attribute changed since is
checked again when the options are next asked for. The base classes keep a leading '_': they
are no layer kinds of their own, so the layer registry leaves them out."""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from torch import nn

from attnlab.core.errors import FormatError, SizeError
from attnlab.functional import rules
from attnlab.core import checks as check
from .base import Layer


def check_heads(layer, port, channels, num_heads, what):
    """Refuses `channels` on `port` that `num_heads` heads cannot share equally."""
    if channels is not None and channels % num_heads:
        raise layer.error(SizeError, port, f"num_heads {num_heads} does not divide the {what} "
                          f"channels {channels}. Use a num_heads that divides {channels}"
                          f"{rules.divisor_hint(channels, num_heads)}, or change the {what} "
                          "channels.")


# the attributes of the options, under the layers' argument names → AttentionOptions fields
_OPTION_ATTRS = {"num_heads": "num_heads", "scale": "scale", "attention_mask": "attention_mask",
                 "causal_alignment": "causal_alignment", "dropout": "dropout",
                 "has_padding_mask_input": "mask_input", "has_scores_output": "need_weights",
                 "num_kv_heads": "num_kv_heads", "rotary": "rotary", "window": "window",
                 "alibi": "alibi", "has_bias_input": "bias_input", "qk_norm": "qk_norm",
                 "softcap": "softcap"}
_SIZE_ATTRS = ("key_channels", "value_channels", "output_channels", "projection_bias",
               "output_bias")


class _Heads(Layer):
    # the module class that `build` makes from the options: a subclass may name another
    module_class: ClassVar[type[nn.Module]]
    _options: rules.AttentionOptions
    # the options `_set_options` sets, declared for the type checker
    num_heads: int
    scale: str | float
    attention_mask: str | None
    causal_alignment: str
    dropout: float
    has_padding_mask_input: bool
    has_scores_output: bool
    num_kv_heads: int | None
    rotary: bool | dict
    window: int | None
    alibi: bool
    has_bias_input: bool
    qk_norm: float | None
    softcap: float | None

    @property
    def options(self) -> rules.AttentionOptions:
        """The layer's options as one object, checked when the layer was made (an attribute
        changed since then is checked here, when the options are next asked for)."""
        if not self._agrees():
            self._check_options()
        return self._options

    def _agrees(self) -> bool:
        o = self._options
        return all(getattr(self, a) == getattr(o, f) for a, f in _OPTION_ATTRS.items())

    def _check_options(self) -> None:
        set_options(self, **{a: getattr(self, a) for a in _OPTION_ATTRS})


class _Projected(_Heads):
    # the sizes `_projection_sizes` sets
    key_channels: int
    value_channels: int | None
    output_channels: int | None
    projection_bias: bool
    output_bias: bool | None

    def _agrees(self) -> bool:
        return super()._agrees() and \
            all(getattr(self, a) == getattr(self._options, a) for a in _SIZE_ATTRS)

    def _check_options(self) -> None:
        super()._check_options()
        projection_sizes(self, self.key_channels, self.value_channels, self.output_channels,
                         self.projection_bias, self.output_bias)


def set_options(layer, **given: Any) -> None:
    """Checks the options by the rules (`rules.options`, their one place) and keeps
    them on `layer` as one object (`_options`) and, under the constructor's names, as
    attributes in their canonical forms (what config(), repr and saving read)."""
    opts = rules.options(layer, **{_OPTION_ATTRS[k]: v for k, v in given.items()})
    for attr, field in _OPTION_ATTRS.items():
        setattr(layer, attr, getattr(opts, field))
    layer._options = opts


def bias_port(layer, specs, tq, tk):
    """The `bias` port: a float B×H×Tq×Tk tensor whose sizes may be 1 (broadcast)."""
    if not layer.has_bias_input:
        return
    s = specs["bias"]
    fix = (f"The bias is added to the scores: give it B×{layer.num_heads}×Tq×Tk (sizes of 1 "
           "broadcast), e.g. from RelativePositionBias or "
           f"ImageInput(({layer.num_heads}, Tq, Tk)).")
    if len(s.sizes) != 4:
        raise layer.error(SizeError, "bias", f"expected B×{layer.num_heads}×Tq×Tk, received {s}. "
                          + fix)
    for what, got, full in (("heads", s.sizes[1], layer.num_heads), ("Tq", s.sizes[2], tq),
                            ("Tk", s.sizes[3], tk)):
        if None not in (got, full) and got not in (1, full):
            raise layer.error(SizeError, "bias", f"expected {full} (or 1) along {what}, "
                              f"received {s}. " + fix)


def bias_ports(layer) -> tuple[str, ...]:
    return (("mask",) if layer.has_padding_mask_input else ()) + \
        (("bias",) if layer.has_bias_input else ())


def projection_sizes(layer, key_channels, value_channels, output_channels, projection_bias=True,
                     output_bias=None):
    layer.projection_bias = rules.flag(layer, "projection_bias", projection_bias)
    layer.output_bias = rules.output_bias(layer, output_bias)
    layer.key_channels = check.integer(layer, "key_channels", key_channels, example=64)
    layer.value_channels = check.integer(layer, "value_channels", value_channels, none_ok=True)
    layer.output_channels = check.integer(layer, "output_channels", output_channels, none_ok=True)
    heads = layer.num_heads
    for arg in ("key_channels", "value_channels"):
        channels = getattr(layer, arg)
        if channels is not None and channels % heads:
            fits = rules.divisors_near(channels, heads)
            raise check.fail(layer, "num_heads", f"a divisor of '{arg}' ({channels}): each head "
                             f"gets {arg} / num_heads channels", heads,
                             f"Use num_heads one of {' or '.join(map(str, fits))}, or make {arg} "
                             f"a multiple of {heads}.")
    if layer.rotary:
        rules.rotary_dims(layer, layer.rotary, layer.key_channels // heads, heads=heads)
    layer._options = dataclasses.replace(layer._options, **{a: getattr(layer, a)
                                                            for a in _SIZE_ATTRS})


def projections_fit(layer, port, query_channels, kv_channels):
    value = layer.value_channels or layer.key_channels
    check.learnables_fit(layer, port, "Use smaller key_channels, value_channels or output_channels.",
                         **{"query weight": (layer.key_channels, query_channels),
                            "key weight": (layer.key_channels, kv_channels),
                            "value weight": (value, kv_channels),
                            "output weight": (layer.output_channels or query_channels, value)})


def sequence_only(layer, spec, port):
    """Self-attention needs a time (or space) axis: explain what to do when there is none."""
    if spec.is_image:
        raise layer.error(FormatError, port, f"expected B×T×C, received {spec} (image). Attention "
                          "relates positions of a sequence: insert ImageToSequence before "
                          f"'{layer.name}' to turn the H×W positions into a sequence of H·W steps.")
    if spec.labels == "BC":
        raise layer.error(FormatError, port, f"expected B×T×C, received {spec} (features): there "
                          "is no time or space axis left to attend over (a Flatten merges the image "
                          "positions into channels). Use ImageToSequence instead of Flatten for "
                          "images, or give attention a sequence.")
    layer.require(spec, port, ("BTC",))
