"""The torch modules that the attention layers build (public as `attnlab.functional`'s):
`AttentionModule` (no learnables), `MultiHeadAttentionModule`, `SelfAttentionModule` and
`AttentionPoolModule`. Each computes through `attnlab.functional.attention`; their stages (`project_q`, `project_kv`, `transform_qk`,
`attend`, `output_map`) are what streaming reuses one by one.

A module made by a layer takes the layer's `AttentionOptions` whole and trusts them: the rules
ran once, when the layer was made. Made directly from loose arguments (`SelfAttentionModule(
channels, num_heads, key_channels, …)`), it checks them by the same rules first.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple, Union, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.functional import rules
from attnlab.functional.rules import AttentionOptions
from attnlab.core.errors import FormatError, SizeError
from attnlab.core.sequences import mask_positions
from attnlab.functional.math import MaskArg, _divisor_hint, _fail, _module_attention, _size
from attnlab.functional.rotary import Rotary

__all__ = ["AttentionOptions", "AttentionModule", "MultiHeadAttentionModule",
           "SelfAttentionModule", "AttentionPoolModule", "QKNormSelfAttentionModule"]


# -- loose arguments: a module made directly, not by a layer ---------------------------------
# Each takes its module's loose signature, checks it by the rules (`rules.options`, as a layer
# does) and returns (the options, the module's sizes).

_MODULE_FLAGS = ("mask_input", "need_weights", "bias_input")


def _module_options(owner: str, sizes: dict, **kw) -> AttentionOptions:
    return rules.options(owner, kv_error=SizeError, flag_names=_MODULE_FLAGS, **kw, **sizes)


def _channels_fit(owner: str, opts: AttentionOptions) -> None:
    """The projections' channels split into whole heads (a size rule of a module's own)."""
    heads = opts.num_heads
    for what, c in (("key", opts.key_channels), ("value", opts.value_channels)):
        if c is not None and c % heads:
            raise SizeError(
                f"{owner}: num_heads {heads} does not divide {what} channels {c}. Use a "
                f"num_heads that divides {c}{_divisor_hint(c, heads)}, or {what} "
                f"channels that are a multiple of {heads}.")


def _loose_attention(owner: str, num_heads: int, scale="auto", dropout: float = 0.0,
                     attention_mask: Optional[str] = None, causal_alignment: str = "top-left",
                     need_weights: bool = False, num_kv_heads: Optional[int] = None, *,
                     rotary: Any = False, head_size: Optional[int] = None,
                     window: Optional[int] = None, alibi: bool = False,
                     bias_input: bool = False, softcap: Optional[float] = None):
    opts = _module_options(owner, {}, num_heads=num_heads, scale=scale, dropout=dropout,
                           attention_mask=attention_mask, causal_alignment=causal_alignment,
                           need_weights=need_weights, num_kv_heads=num_kv_heads, rotary=rotary,
                           window=window, alibi=alibi, bias_input=bias_input, softcap=softcap)
    if opts.rotary:
        if head_size is None:
            raise rules._fail(owner, "head_size", "the channels per head (an int) with "
                              "rotary", head_size, "Pass head_size=key channels / num_heads.")
        rules.rotary_dims(owner, opts.rotary, head_size, SizeError)
    return opts, (head_size,)


def _loose_multi_head(owner: str, query_channels: int, key_channels_in: int,
                      value_channels_in: int, num_heads: int, key_channels: int,
                      value_channels: Optional[int] = None,
                      output_channels: Optional[int] = None, num_kv_heads: Optional[int] = None,
                      scale="auto", dropout: float = 0.0, bias: bool = True,
                      attention_mask: Optional[str] = None, causal_alignment: str = "top-left",
                      need_weights: bool = False, *, rotary: Any = False,
                      window: Optional[int] = None, alibi: bool = False,
                      bias_input: bool = False, output_bias: Optional[bool] = None,
                      qk_norm: Optional[float] = None, softcap: Optional[float] = None):
    sizes = {"key_channels": key_channels, "value_channels": value_channels,
             "output_channels": output_channels, "projection_bias": bias,
             "output_bias": rules.output_bias(owner, output_bias)}
    opts = _module_options(owner, sizes, num_heads=num_heads, scale=scale, dropout=dropout,
                           attention_mask=attention_mask, causal_alignment=causal_alignment,
                           need_weights=need_weights, num_kv_heads=num_kv_heads, rotary=rotary,
                           window=window, alibi=alibi, bias_input=bias_input, qk_norm=qk_norm,
                           softcap=softcap)
    _channels_fit(owner, opts)
    if opts.rotary:
        rules.rotary_dims(owner, opts.rotary, key_channels // opts.num_heads, SizeError)
    return opts, (query_channels, key_channels_in, value_channels_in)


def _loose_self(owner: str, channels: int, num_heads: int, key_channels: int,
                value_channels: Optional[int] = None, output_channels: Optional[int] = None,
                num_kv_heads: Optional[int] = None, scale="auto", dropout: float = 0.0,
                bias: bool = True, attention_mask: Optional[str] = None,
                need_weights: bool = False, **kw):
    opts, _ = _loose_multi_head(owner, channels, channels, channels, num_heads, key_channels,
                                value_channels, output_channels, num_kv_heads, scale, dropout,
                                bias, attention_mask, "top-left", need_weights, **kw)
    return opts, (channels,)


def _loose_pool(owner: str, channels: int, num_heads: int, dropout: float = 0.0,
                bias: bool = True):
    opts = _module_options(owner, {"key_channels": channels, "value_channels": channels,
                                   "projection_bias": bias},
                           num_heads=num_heads, dropout=dropout)
    _channels_fit(owner, opts)
    return opts, (channels,)


def _given(loose: Callable, owner: str, options: Any, sizes: tuple, kw: dict):
    """(the options, the sizes) of a module's arguments: the options a layer checked, or the
    loose arguments checked now by `loose`."""
    if isinstance(options, AttentionOptions):
        return options, sizes
    return loose(owner, *((options,) if options is not None else ()), *sizes, **kw)


def _init_linear(lin: nn.Linear) -> None:
    # Glorot weights and zero biases: MATLAB's and Keras' defaults for attention projections
    nn.init.xavier_uniform_(lin.weight)
    if lin.bias is not None:
        nn.init.zeros_(lin.bias)


_UNSET: Any = object()   # "the module's own setting" for a keyword left out

# the registries of hooks that run on every module (torch.nn.modules.module.
# register_module_forward_hook, …): mutated in place, so held once here
_GLOBAL_HOOKS = tuple(getattr(nn.modules.module, n) for n in (
    "_global_backward_pre_hooks", "_global_backward_hooks", "_global_forward_pre_hooks",
    "_global_forward_hooks", "_global_forward_hooks_always_called",
    "_global_forward_hooks_with_kwargs") if hasattr(nn.modules.module, n))


def global_module_hooks() -> bool:
    """Whether a hook that runs on every module is registered."""
    return any(_GLOBAL_HOOKS)


def plain_linear(m: Optional[nn.Module]) -> bool:
    """Whether `m` is a bare `nn.Linear` that nothing watches, so that reading its weight and
    bias (to fuse q, k and v into one matmul) computes exactly what calling it does.

    Anything else is called as a module: a subclass, a wrapper (peft's LoRA `Linear`), a
    parametrized Linear (`torch.nn.utils.parametrize` changes its class), a Linear with hooks
    of its own (forward, pre-forward, backward: weight_norm and spectral_norm are pre-forward
    hooks) or a `forward` set on the instance, and every projection while a global module hook
    is registered. Python checks only: cheap enough for every call, never a device sync."""
    return type(m) is nn.Linear and not (
        m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or
        m._backward_pre_hooks or "forward" in m.__dict__)


def _key_mask(key_padding_mask, port_mask, mask_port, keys: Tensor, at=None):
    """The key padding mask (B×Tk, True = attend): the explicit one AND the key sequence's
    padding (`masks=`) AND the optional `mask` port (B×Tk or B×Tk×C, nonzero = attend), which
    must have the keys' (`keys`, B×Tk×C) batch and length (a B×1 mask would broadcast)."""
    key_mask = key_padding_mask
    if port_mask is not None:
        key_mask = port_mask if key_mask is None else key_mask & port_mask
    if mask_port:
        m = mask_port[0]
        if not isinstance(m, Tensor) or m.dim() not in (2, 3) or m.shape[:2] != keys.shape[:2]:
            b, t = keys.shape[:2]
            got = _size(m) if isinstance(m, Tensor) else type(m).__name__
            fix = "Give one entry per key step (nonzero or True = attend)."
            raise _fail(SizeError, at, "mask", f"the mask port must be B×Tk = {b}×{t} (or "
                        f"B×Tk×C), received {got}. {fix}", f"B×Tk = {b}×{t} (or B×Tk×C)", got,
                        fix)
        m = (m[..., 0] if m.dim() == 3 else m) != 0                          # B×Tk×C → B×Tk
        key_mask = m if key_mask is None else key_mask & m
    return key_mask


class AttentionModule(nn.Module):
    """Attention without learnables, as the `Attention` layer builds it:
    `B×Tq×Ck, B×Tk×Ck, B×Tk×Cv (, mask B×Tk) → B×Tq×Cv` (plus `B×H×Tq×Tk` weights when
    `need_weights`).

    The stages every attention module shares, which streaming reuses one by one:
    `project_q(x)`, `project_kv(key, value)`, `transform_qk(q, k, q_pos, k_pos)` (the rotary
    embedding when `rotary` is set, else the identity: the place for a position-dependent map
    of queries and keys) and `attend(q, k, v, …)` (the attention and the output map).
    `forward(query, key, value, *ports, masks=…)` follows the plan's calling convention: ports
    positional (the `mask` port, then the `bias` port when `bias_input`), the input sequences'
    padding masks by keyword; `key_padding_mask`, `attention_mask`, `causal_alignment`,
    `need_weights` and `bias` override the module's settings for one call.

    Options for today's transformers: `rotary` (False or the settings dict of
    `rules.rotary`; `head_size` is the channels per head), `window` (sliding window,
    keys a query sees), `alibi` (ALiBi distance bias), `bias_input` (the last positional port
    is a float bias added to the scores).

    `options`: the `AttentionOptions` it was made from (a layer's, checked when the layer was
    made; the module trusts them). `layer_name`: the layer that built the module; a tensor
    that does not fit at run time
    (the `bias` or `mask` port, key and value lengths) is then reported as
    `layer 'NAME' port 'PORT': expected …, received ….` with the fix.
    """

    # the layer's port of each tensor the attention math checks
    PORTS = {"query": "query", "key": "key", "value": "value", "key_padding_mask": "mask",
             "mask": "mask", "bias": "bias"}

    def __init__(self, options: Any = None, *sizes: Any, layer_name: Optional[str] = None,
                 **loose: Any):
        """`AttentionModule(options, head_size)`: a layer's checked options, and the channels
        per head (the rotary embedding's size; None without rotary). Or the loose arguments,
        checked here: `AttentionModule(num_heads, scale="auto", dropout=0.0,
        attention_mask=None, causal_alignment="top-left", need_weights=False,
        num_kv_heads=None, *, rotary=False, head_size=None, window=None, alibi=False,
        bias_input=False)`."""
        super().__init__()
        opts, (head_size,) = _given(_loose_attention, type(self).__name__, options, sizes,
                                    loose)
        self.options = opts                   # the layer's, trusted: checked when it was made
        self.layer_name = layer_name
        self.head_size = head_size
        self.num_heads = opts.num_heads
        self.num_kv_heads = opts.kv_heads
        self.scale = opts.scale
        self.dropout = opts.dropout
        self.attention_mask = opts.attention_mask
        self.causal_alignment = opts.causal_alignment
        self.scores = opts.need_weights                    # weights by default
        self.window = opts.window
        self.alibi = opts.alibi
        self.bias_input = opts.bias_input
        self.softcap = opts.softcap
        settings = opts.rotary
        self.rotary: Optional[Rotary] = None
        # a full pass turns each step by its place among its sequence's real steps
        self.mask_positions = isinstance(settings, dict) and \
            settings.get("positions") == "mask"
        if isinstance(settings, dict):      # head_size given: checked when the options were
            self.rotary = Rotary(cast(int, head_size), settings["base"], settings["fraction"],
                                 settings["interleaved"], settings.get("scaling"), layer_name)

    @property
    def positional(self) -> bool:
        """Whether the output depends on absolute or relative positions beyond the causal rule
        (rotary, a window, ALiBi): what a stream must pass positions for."""
        return self.rotary is not None or self.window is not None or self.alibi

    def _gqa(self) -> Optional[int]:
        return None if self.num_kv_heads == self.num_heads else self.num_kv_heads

    def _port(self, arg: str) -> Tuple[Optional[str], Optional[str]]:
        """(the layer's name, its port) of an attention argument, for errors."""
        return self.layer_name, self.PORTS.get(arg)

    def _at(self):
        return None if self.layer_name is None else self._port

    def project_q(self, x: Tensor) -> Tensor:
        return x

    def project_kv(self, key: Tensor, value: Tensor) -> Tuple[Tensor, Tensor]:
        return key, value

    def transform_qk(self, q: Tensor, k: Tensor, q_pos: Union[int, Tensor],
                     k_pos: Union[int, Tensor]) -> Tuple[Tensor, Tensor]:
        """Queries B×Tq×Ck and keys B×Tk×Ckv after projection, before attention. `q_pos` and
        `k_pos` are the absolute positions of their steps: an int (the first step's position,
        the others follow one by one), a 1-D tensor with one position per step, or a B×T
        tensor with one per step of each sequence (`positions`). Identity
        here; override it for position-dependent maps (a rotary embedding). The full forward
        passes 0, 0; a stream passes the steps' positions in the stream. With `rotary` set this
        is the rotary embedding of both."""
        if self.rotary is not None:
            return self.rotary(q, q_pos), self.rotary(k, k_pos)
        return q, k

    def output_map(self, y: Tensor) -> Tensor:
        return y

    def positions(self, mask: Optional[Tensor]) -> Union[int, Tensor]:
        """The positions a full pass gives `transform_qk` for a sequence with this padding
        mask (B×T, True = real step, or None): 0 (each step's index), or with rotary
        ``positions="mask"`` and a mask, each step's place among its sequence's real steps
        (`mask_positions`, B×T)."""
        if mask is None or not self.mask_positions:
            return 0
        return mask_positions(mask)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, key_padding_mask: Optional[Tensor] = None,
               attention_mask: MaskArg = None, causal_alignment: str = "top-left",
               need_weights: bool = False, bias: Optional[Tensor] = None,
               offset: Optional[int] = None):
        """Attention of projected (and transformed) q, k, v, then the output map. `bias`: the
        additive score term (B×H×Tq×Tk broadcastable); `offset`: query i sits at key position
        i + offset (a stream's queries against its cache), else `causal_alignment` decides."""
        r = _module_attention(q, k, v, self.num_heads, self.scale, key_padding_mask,
                              attention_mask, causal_alignment, self.dropout, need_weights,
                              self.training, self.num_kv_heads, bias, self.window, self.alibi,
                              offset, self._at(), self.softcap)
        if need_weights:
            return self.output_map(r[0]), r[1]
        return self.output_map(r)

    def _settings(self, attention_mask, causal_alignment, need_weights):
        """The module's settings, or those a call gives instead: checked here, as al.attention
        checks its arguments (the module's own were checked when it was made)."""
        fn = "attention:"
        return (self.attention_mask if attention_mask is _UNSET else
                rules.attention_mask(fn, attention_mask, tensors_ok=True),
                self.causal_alignment if causal_alignment is None else
                rules.causal_alignment(fn, causal_alignment),
                self.scores if need_weights is None else
                rules.flag(fn, "need_weights", need_weights))

    def _ports(self, ports: tuple, bias: Optional[Tensor]):
        """(the mask port as a 0- or 1-tuple, the bias): the bias port comes last."""
        if self.bias_input and ports:
            return ports[:-1], ports[-1] if bias is None else bias
        return ports, bias

    def forward(self, query: Tensor, key: Tensor, value: Tensor, *ports: Tensor,
                masks=None, key_padding_mask: Optional[Tensor] = None,
                attention_mask: MaskArg = _UNSET, causal_alignment: Optional[str] = None,
                need_weights: Optional[bool] = None, bias: Optional[Tensor] = None):
        mask_port, bias = self._ports(ports, bias)
        kpm = _key_mask(key_padding_mask, masks[1] if masks else None, mask_port, key,
                        self._at())
        am, align, nw = self._settings(attention_mask, causal_alignment, need_weights)
        k, v = self.project_kv(key, value)
        q_mask, k_mask = (masks[0], masks[1]) if masks else (None, None)
        q, k = self.transform_qk(self.project_q(query), k, self.positions(q_mask),
                                 self.positions(k_mask))
        return self.attend(q, k, v, kpm, am, align, nw, bias)


class MultiHeadAttentionModule(AttentionModule):
    """Multi-head (cross-)attention with learned projections.

    `B×Tq×Cq, B×Tk×Ck_in, B×Tk×Cv_in → B×Tq×Cout` (plus `B×H×Tq×Tk` weights on request).

    Learnables: four `nn.Linear` named `query` (Cq→key_channels), `key` (Ck_in→key_channels,
    or num_kv_heads·dk with grouped-query attention), `value` (Cv_in→value_channels, or
    num_kv_heads·dv) and `output` (value_channels→Cout), with biases unless `bias=False`
    (the output's unless `output_bias=False`, or with `output_bias=True`);
    weights are out×in, so they copy
    to and from `torch.nn.MultiheadAttention` and MATLAB's QueryWeights… directly
    (docs/attention.md). `value_channels` defaults to `key_channels`, Cout to Cq.
    The stages and the calling convention are those of `AttentionModule`.
    """

    def __init__(self, options: Any = None, *sizes: Any, layer_name: Optional[str] = None,
                 **loose: Any):
        """`MultiHeadAttentionModule(options, query_channels, key_channels_in,
        value_channels_in)`: a layer's checked options and the channels arriving at its three
        inputs. Or the loose arguments, checked here: `MultiHeadAttentionModule(query_channels,
        key_channels_in, value_channels_in, num_heads, key_channels, value_channels=None,
        output_channels=None, num_kv_heads=None, scale="auto", dropout=0.0, bias=True,
        attention_mask=None, causal_alignment="top-left", need_weights=False, *, rotary=False,
        window=None, alibi=False, bias_input=False, output_bias=None)`."""
        opts, (query_channels, key_channels_in, value_channels_in) = _given(
            _loose_multi_head, type(self).__name__, options, sizes, loose)
        key_channels = cast(int, opts.key_channels)            # options of a projection
        value_channels = key_channels if opts.value_channels is None else opts.value_channels
        output_channels = query_channels if opts.output_channels is None else \
            opts.output_channels
        heads, kv, bias = opts.num_heads, opts.kv_heads, opts.projection_bias
        super().__init__(opts, key_channels // heads, layer_name=layer_name)
        kv_key = key_channels // heads * kv
        kv_value = value_channels // heads * kv
        # the sizes, kept apart from the projections, which a wrapper may replace: channels in
        # (query, key, value) and out of the three input projections (q, k, v)
        self.in_channels = (query_channels, key_channels_in, value_channels_in)
        self.qkv_channels = (key_channels, kv_key, kv_value)
        self.query = nn.Linear(query_channels, key_channels, bias=bias)
        self.key = nn.Linear(key_channels_in, kv_key, bias=bias)
        self.value = nn.Linear(value_channels_in, kv_value, bias=bias)
        self.output = nn.Linear(value_channels, output_channels, bias=opts.output_has_bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.query, self.key, self.value, self.output):
            _init_linear(lin)

    def project_q(self, x: Tensor) -> Tensor:
        return self.query(x)

    def project_kv(self, key: Tensor, value: Tensor) -> Tuple[Tensor, Tensor]:
        return self.key(key), self.value(value)

    def output_map(self, y: Tensor) -> Tensor:
        return self.output(y)


def adjacent_rows(parts: Tuple[Tensor, ...]) -> Optional[Tensor]:
    """The tensors `parts` (same trailing sizes) as one, their rows one after the other,
    when they are already so in one storage: a view, no copy (detached: for use without
    gradients). None where they are not (each moved or loaded apart: `.to()`, an assignment
    of `.data`), so that the caller falls back on one matmul each rather than copying."""
    first = parts[0].detach()
    size, stride = first.shape, first.stride()
    if first.dim() == 0 or first.is_meta:
        return None
    ptr, storage, rows = first.data_ptr(), first.untyped_storage().data_ptr(), 0
    for t in parts:                             # each starts where the rows before it end
        if t.shape[1:] != size[1:] or t.stride() != stride or t.dtype != first.dtype or \
                t.device != first.device or t.untyped_storage().data_ptr() != storage or \
                t.data_ptr() != ptr + rows * stride[0] * first.element_size():
            return None
        rows += t.shape[0]
    return first.as_strided((rows,) + tuple(size[1:]), stride, first.storage_offset())


class SelfAttentionModule(MultiHeadAttentionModule):
    """Multi-head self-attention: `B×T×C → B×T×Cout` (plus `B×H×T×T` weights on request).

    The learnables are those of `MultiHeadAttentionModule` with query = key = value input:
    four `nn.Linear` named `query`, `key`, `value`, `output`. The three input projections run
    as one matmul against their concatenated weights (`project_qkv`; the parameters stay
    separate). `forward(x, *mask_port, masks=…)`: the plan's calling convention.
    """

    PORTS = {"query": "in", "key": "in", "value": "in", "key_padding_mask": "mask",
             "mask": "mask", "bias": "bias"}

    def __init__(self, options: Any = None, *sizes: Any, layer_name: Optional[str] = None,
                 **loose: Any):
        """`SelfAttentionModule(options, channels)`: a layer's checked options and the input's
        channels. Or the loose arguments, checked here: `SelfAttentionModule(channels,
        num_heads, key_channels, value_channels=None, output_channels=None, num_kv_heads=None,
        scale="auto", dropout=0.0, bias=True, attention_mask=None, need_weights=False, *,
        rotary=False, window=None, alibi=False, bias_input=False, output_bias=None)`."""
        opts, (channels,) = _given(_loose_self, type(self).__name__, options, sizes, loose)
        super().__init__(opts, channels, channels, channels, layer_name=layer_name)

    def reset_parameters(self) -> None:
        self.pack_qkv(keep=False)           # their values are about to be set anew
        super().reset_parameters()

    def pack_qkv(self, keep: bool = True) -> None:
        """Puts the q, k, v weights (and biases) in one storage, one after the other, so that
        `fused_qkv` reads them in place. The Parameters stay (their `.data` becomes slices):
        names, state_dict keys, optimizers and ties are untouched. Nothing to do where they are
        already so or cannot be (projections that are not bare `nn.Linear`s). `keep`: their
        values are copied (else the new storage is left uninitialised, for a reset)."""
        if not self.fusable():
            return
        mods = (self.query, self.key, self.value)
        for name in ("weight", "bias"):
            params = [getattr(m, name) for m in mods]
            if any(p is None for p in params) or params[0].is_meta or \
                    len({(p.dtype, p.device) for p in params}) > 1 or \
                    adjacent_rows(tuple(params)) is not None:
                continue
            with torch.no_grad():
                whole = torch.cat([p.detach() for p in params]) if keep else \
                    params[0].new_empty((sum(p.shape[0] for p in params),) + params[0].shape[1:])
            for p, piece in zip(params, whole.split([p.shape[0] for p in params])):
                p.data = piece

    def _apply(self, fn, recurse=True):
        # `.to()` / `.half()` move each learnable apart: the q, k, v that were one storage
        # are packed again (one layer at a time, so the copy is transient)
        with torch.no_grad():
            was = self.fusable() and adjacent_rows((self.query.weight, self.key.weight,
                                                    self.value.weight)) is not None
        out = super()._apply(fn, recurse)
        if was:
            self.pack_qkv()
        return out

    def fusable(self) -> bool:
        """Whether q, k and v may run as one matmul against their concatenated weights: the
        three projections are bare `nn.Linear`s (`plain_linear`) and no global module hook is
        registered. Otherwise each projection is called as the module it is."""
        mods = self._modules
        return plain_linear(mods["query"]) and plain_linear(mods["key"]) and \
            plain_linear(mods["value"]) and not global_module_hooks()

    def fused_qkv(self) -> Optional[Tuple[Tensor, Optional[Tensor]]]:
        """The q, k, v weights (and biases) as one tensor, so that one matmul projects all
        three; None when the projections must be called as modules (see `fusable`).

        Without gradients (decoding) it is never a copy: where the three lie one after the
        other in one storage (`adjacent_rows`; GPT-2's fused q|k|v as loaded) a view of them,
        else None, and the projections run as three matmuls. A copy would double the
        projections' memory for as long as a stream keeps it. With gradients it is their
        concatenation, through which the gradients flow to each."""
        if not self.fusable():
            return None
        q, k, v = self.query, self.key, self.value
        weights, biases = (q.weight, k.weight, v.weight), (q.bias, k.bias, v.bias)
        if any(b is None for b in biases) and not all(b is None for b in biases):
            return None                         # a bias on some only: one call each
        tensors = weights + (biases if biases[0] is not None else ())
        if (torch.is_grad_enabled() and any(t.requires_grad for t in tensors)) or \
                torch.jit.is_tracing() or torch.onnx.is_in_onnx_export():
            # autograd, and a traced graph's constants, need the weights as their own
            return torch.cat(weights), None if biases[0] is None else torch.cat(biases)
        w = adjacent_rows(weights)
        b = None if biases[0] is None else adjacent_rows(biases)
        if w is None or (biases[0] is not None and b is None):
            return None
        return w, b

    def qkv(self, x: Tensor, fused: Tuple[Tensor, Optional[Tensor]]) -> Tensor:
        """q, k, v of x side by side, B×T×(Ck + Ck_kv + Cv_kv), in one matmul against `fused`,
        weights from `fused_qkv` made beforehand (a stream makes them once)."""
        return F.linear(x, *fused)

    def project_qkv(self, x: Tensor, fused: Optional[Tuple[Tensor, Optional[Tensor]]] = None):
        """q, k, v of x: views of one matmul (`qkv`) against `fused` or the weights
        concatenated now when the projections allow it, else each projection called."""
        if fused is None:
            fused = self.fused_qkv()
            if fused is None:
                return self.query(x), self.key(x), self.value(x)
        return self.qkv(x, fused).split(self.qkv_channels, dim=-1)

    # one input instead of three: a narrower signature than the parent's, by design
    def forward(self, x: Tensor, *ports: Tensor, masks=None,  # type: ignore[override]
                key_padding_mask: Optional[Tensor] = None, attention_mask: MaskArg = _UNSET,
                need_weights: Optional[bool] = None, bias: Optional[Tensor] = None):
        if not isinstance(x, Tensor) or x.dim() != 3:
            raise FormatError(
                f"{type(self).__name__}: input must be B×T×C (3 dimensions), received "
                f"{_size(x) if isinstance(x, Tensor) else type(x).__name__}. "
                f"Add a batch dimension with x.unsqueeze(0) or reshape it to B×T×C.")
        c = self.in_channels[0]
        if x.shape[-1] != c:
            raise SizeError(
                f"{type(self).__name__}: input has {x.shape[-1]} channels, expected {c}. Give "
                f"it {c} channels or build the module for {x.shape[-1]}.")
        mask_port, bias = self._ports(ports, bias)
        kpm = _key_mask(key_padding_mask, masks[0] if masks else None, mask_port, x, self._at())
        am, _, nw = self._settings(attention_mask, None, need_weights)
        q, k, v = self.project_qkv(x)
        pos = self.positions(masks[0] if masks else None)
        q, k = self.transform_qk(q, k, pos, pos)
        return self.attend(q, k, v, kpm, am, "top-left", nw, bias)


class HeadRMSNorm(nn.Module):
    """x / rms(x) · weight over the d channels of each head (B×T×(H·d) in and out), in float32
    and cast back before the gain, as Qwen3's `q_norm` and `k_norm` (Llama's RMSNorm)."""

    def __init__(self, head_size: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(head_size))

    def forward(self, x: Tensor) -> Tensor:
        b, t, c = x.shape                   # sizes read from x: the ONNX graph keeps them free
        d = self.weight.shape[0]
        h = x.reshape(b, t, c // d, d).float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight * h.to(x.dtype)).reshape(b, t, c)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


class QKNormSelfAttentionModule(SelfAttentionModule):
    """Self-attention whose queries and keys are RMS-normalised per head (`qk_norm`, the
    options' eps) before the rotary embedding, as Qwen3's: the `transform_qk` hook, which a
    stream calls on every new step. Learnables `q_norm.weight`, `k_norm.weight` (the head
    size each) besides `SelfAttentionModule`'s. `SelfAttention(qk_norm=eps)` builds it."""

    def __init__(self, options: Any = None, *sizes: Any, layer_name: Optional[str] = None,
                 **loose: Any):
        super().__init__(options, *sizes, layer_name=layer_name, **loose)
        eps = self.options.qk_norm
        if eps is None:
            raise rules._fail(type(self).__name__, "qk_norm", "the eps of the per-head "
                              "RMSNorm, a number > 0", eps, "Pass e.g. qk_norm=1e-6.")
        d = self.qkv_channels[0] // self.num_heads
        self.q_norm, self.k_norm = HeadRMSNorm(d, eps), HeadRMSNorm(d, eps)

    def transform_qk(self, q: Tensor, k: Tensor, q_pos: Union[int, Tensor],
                     k_pos: Union[int, Tensor]) -> Tuple[Tensor, Tensor]:
        # normalised first, then turned by the rotary embedding, as Qwen3 does
        return super().transform_qk(self.q_norm(q), self.k_norm(k), q_pos, k_pos)


class AttentionPoolModule(nn.Module):
    """Attention pooling over time: `B×T×C (+ key_padding_mask B×T) → B×C`.

    A learned query (`query_vector`, 1×1×C) attends over the sequence with `num_heads` heads.
    Learnables: `query_vector`, and `nn.Linear`s `key`, `value`, `output` (C→C each). There is
    no `query` projection: a linear map of a learned constant is just another learned
    constant. `query_vector` starts at zero, so the layer starts as masked mean pooling
    (then `output`). A sequence with every step padded pools to 0 before `output`.
    """

    def __init__(self, options: Any = None, *sizes: Any, **loose: Any):
        """`AttentionPoolModule(options, channels)`: a layer's checked options (num_heads,
        dropout) and the input's channels. Or the loose arguments, checked here:
        `AttentionPoolModule(channels, num_heads, dropout=0.0, bias=True)`."""
        super().__init__()
        opts, (channels,) = _given(_loose_pool, type(self).__name__, options, sizes, loose)
        self.options = opts
        self.num_heads, self.dropout, bias = opts.num_heads, opts.dropout, opts.projection_bias
        self.query_vector = nn.Parameter(torch.zeros(1, 1, channels))
        self.key = nn.Linear(channels, channels, bias=bias)
        self.value = nn.Linear(channels, channels, bias=bias)
        self.output = nn.Linear(channels, channels, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.zeros_(self.query_vector)
        for lin in (self.key, self.value, self.output):
            _init_linear(lin)

    def forward(self, x: Tensor, *, masks=None, key_padding_mask: Optional[Tensor] = None,
                need_weights: bool = False):
        """`masks=(mask,)`: the input's padding (the plan's calling convention), ANDed with
        `key_padding_mask`."""
        if not isinstance(x, Tensor) or x.dim() != 3:
            raise FormatError(
                f"{type(self).__name__}: input must be B×T×C (3 dimensions), received "
                f"{_size(x) if isinstance(x, Tensor) else type(x).__name__}. "
                f"Add a batch dimension with x.unsqueeze(0).")
        key_padding_mask = _key_mask(key_padding_mask, masks[0] if masks else None, (), x)
        q = self.query_vector.expand(x.shape[0], 1, -1)  # B×1×C
        r = _module_attention(q, self.key(x), self.value(x), self.num_heads, "auto",
                              key_padding_mask, None, "top-left", self.dropout, need_weights,
                              self.training, self.num_heads)
        y = r[0] if isinstance(r, tuple) else r
        out = self.output(y.squeeze(1))  # B×C
        return (out, r[1]) if need_weights else out
