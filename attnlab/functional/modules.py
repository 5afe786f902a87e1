"""The torch modules that the attention layers build (public as `attnlab.functional`'s):
`AttentionModule` (no learnables), `MultiHeadAttentionModule`, `SelfAttentionModule`,
`QKNormSelfAttentionModule` and `AttentionPoolModule`. Each computes through
`attnlab.functional.attention`; their stages (`project_q`, `project_kv`, `transform_qk`,
`attend`, `output_map`) are what streaming reuses one by one.

A module made by a layer takes the layer's `AttentionOptions` whole and trusts them: the rules
ran once, when the layer was made. Made directly from loose arguments (`SelfAttentionModule(
channels, num_heads, key_channels, …)`), it checks them by the same rules first
(`functional/loose.py`). Self-attention's q, k and v run as one matmul
(`functional/projections.py`).
"""
from __future__ import annotations

from typing import Any, Optional, Tuple, Union, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.core.errors import FormatError, SizeError
from attnlab.core.sequences import mask_positions
from attnlab.functional import loose as arguments, projections, rules
from attnlab.functional.math import MaskArg, _fail, _module_attention, _size
from attnlab.functional.probe import Probe
# plain_linear and global_module_hooks: read here by the streaming steppers too
from attnlab.functional.projections import Stacked, global_module_hooks, plain_linear  # noqa: F401
from attnlab.functional.rotary import Rotary
from attnlab.functional.rules import AttentionOptions

__all__ = ["AttentionOptions", "AttentionModule", "MultiHeadAttentionModule",
           "SelfAttentionModule", "AttentionPoolModule", "QKNormSelfAttentionModule"]


_UNSET: Any = object()   # "the module's own setting" for a keyword left out


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

    # what a trace asks of this module's inside (functional/probe.py); None: nothing, and
    # attention runs exactly as without a trace
    probe: Optional[Probe] = None

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
        opts, (head_size,) = arguments.given(arguments.attention, type(self).__name__, options, sizes,
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
        i + offset (a stream's queries against its cache), else `causal_alignment` decides.
        With a `probe` set (a trace), the probe sees and may replace the queries and keys
        (B×H×T×dk; the keys B×Hkv×T×dk with grouped-query attention), the weights and each
        head's output (functional/probe.py)."""
        probe = self.probe
        if probe is not None:
            q, k = self._probed(probe, "query", q, self.num_heads), \
                self._probed(probe, "key", k, self.num_kv_heads)
        r = _module_attention(q, k, v, self.num_heads, self.scale, key_padding_mask,
                              attention_mask, causal_alignment, self.dropout, need_weights,
                              self.training, self.num_kv_heads, bias, self.window, self.alibi,
                              offset, self._at(), self.softcap, probe)
        if need_weights:
            return self.output_map(r[0]), r[1]
        return self.output_map(r)

    @staticmethod
    def _probed(probe: Probe, port: str, x: Tensor, heads: int) -> Tensor:
        """`x` (B×T×(heads·d)) shown to the probe head-major, B×heads×T×d, and back."""
        if not probe.wants(port) or not isinstance(x, Tensor) or x.dim() != 3 or \
                x.shape[-1] % heads:
            return x                          # a tensor that does not fit: the checks say so
        b, t, c = x.shape
        y = probe(port, x.unflatten(-1, (heads, c // heads)).transpose(1, 2))
        return y.transpose(1, 2).reshape(b, t, c)

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
        opts, (query_channels, key_channels_in, value_channels_in) = arguments.given(
            arguments.multi_head, type(self).__name__, options, sizes, loose)
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
            projections.init_linear(lin)

    def project_q(self, x: Tensor) -> Tensor:
        return self.query(x)

    def project_kv(self, key: Tensor, value: Tensor) -> Tuple[Tensor, Tensor]:
        return self.key(key), self.value(value)

    def output_map(self, y: Tensor) -> Tensor:
        return self.output(y)


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
        opts, (channels,) = arguments.given(arguments.self_attention, type(self).__name__,
                                            options, sizes, loose)
        super().__init__(opts, channels, channels, channels, layer_name=layer_name)

    def reset_parameters(self) -> None:
        self.pack_qkv(keep=False)           # their values are about to be set anew
        super().reset_parameters()

    def _qkv_modules(self) -> Tuple[nn.Linear, nn.Linear, nn.Linear]:
        return self.query, self.key, self.value

    def pack_qkv(self, keep: bool = True) -> None:
        """Puts the q, k, v weights (and biases) in one storage, row-major, one after the
        other (`projections.pack`), so that one matmul reads them in place. The Parameters
        stay: names, state_dict keys, optimizers and ties are untouched. Nothing to do where
        they are already so or cannot be (projections that are not bare `nn.Linear`s).
        `keep`: their values are copied (else left uninitialised, for a reset). A loader
        that places the weights apart (`.data` assigned) calls it to pack them again."""
        if self.fusable():
            projections.pack(self._qkv_modules(), keep)

    def _apply(self, fn, recurse=True):
        # `.to()` / `.half()` move each learnable apart: the q, k, v that were one storage
        # are packed again (one layer at a time, so the copy is transient)
        with torch.no_grad():
            was = self.fusable() and projections.adjacent_rows(
                (self.query.weight, self.key.weight, self.value.weight)) is not None
        out = super()._apply(fn, recurse)
        if was:
            self.pack_qkv()
        return out

    def fusable(self) -> bool:
        """Whether q, k and v run as one matmul against their stacked weights: the three
        projections are bare `nn.Linear`s (`plain_linear`) and no global module hook is
        registered. Otherwise each projection is called as the module it is. The path
        follows from this alone, never from where the weights lie (`project_qkv`)."""
        mods = self._modules
        return projections.fusable((mods["query"], mods["key"], mods["value"]))

    def fused_qkv(self) -> Optional[Stacked]:
        """The q, k, v weights (and biases) as one tensor, so that one matmul projects all
        three; None when the projections must be called as modules (see `fusable`).

        Without gradients (decoding) it is never a copy: where the three lie one after the
        other in one storage (packed; GPT-2's fused q|k|v read in place from its file) a
        view of them, else None. A copy would double the projections' memory for as long
        as a stream keeps it. With gradients it is their concatenation, through which the
        gradients flow to each."""
        if not self.fusable():
            return None
        return projections.stacked(self._qkv_modules(), copy=False)

    def qkv(self, x: Tensor, fused: Stacked) -> Tensor:
        """q, k, v of x side by side, B×T×(Ck + Ck_kv + Cv_kv), in one matmul against `fused`,
        weights from `fused_qkv` made beforehand (a stream makes them once)."""
        return F.linear(x, *fused)

    def project_qkv(self, x: Tensor, fused: Optional[Stacked] = None):
        """q, k, v of x: views of one matmul (`qkv`) against `fused`, or when the projections
        are `fusable` against their stacked weights (a view of them where they are packed,
        else their concatenation for this call: the same matrix either way, so the same
        numbers however the weights lie); else each projection called."""
        if fused is None:
            fused = projections.stacked(self._qkv_modules(), copy=True) \
                if self.fusable() else None
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
    A `probe` (a trace) sees its inside as `AttentionModule`'s, with one query step.
    """

    probe: Optional[Probe] = None

    def __init__(self, options: Any = None, *sizes: Any, **loose: Any):
        """`AttentionPoolModule(options, channels)`: a layer's checked options (num_heads,
        dropout) and the input's channels. Or the loose arguments, checked here:
        `AttentionPoolModule(channels, num_heads, dropout=0.0, bias=True)`."""
        super().__init__()
        opts, (channels,) = arguments.given(arguments.pool, type(self).__name__, options,
                                            sizes, loose)
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
            projections.init_linear(lin)

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
        k, probe = self.key(x), self.probe
        if probe is not None:
            q = AttentionModule._probed(probe, "query", q, self.num_heads)
            k = AttentionModule._probed(probe, "key", k, self.num_heads)
        r = _module_attention(q, k, self.value(x), self.num_heads, "auto",
                              key_padding_mask, None, "top-left", self.dropout, need_weights,
                              self.training, self.num_heads, probe=probe)
        y = r[0] if isinstance(r, tuple) else r
        out = self.output(y.squeeze(1))  # B×C
        return (out, r[1]) if need_weights else out
