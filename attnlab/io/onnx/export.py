"""ONNX export with dynamic batch size and sequence lengths, checked with onnxruntime.

The exported model's inputs are the network's inputs, in `net.input_names` order, each followed —
for a sequence input and with `masks=True` (the default) — by its padding mask:

    <input>        float  B×T×C (sequences), B×C×H×W (images), B×C (features)
                   int64  B×T (token ids of a `TokenInput`)
    <input>_mask   bool   B×T, True = a real time step, False = padding

Batch (`batch`) and every sequence input's length (`<input>_time`) are dynamic. The masks play the
part of `al.Padded(data, mask)`: LSTMs stop at each sequence's end, attention ignores padded keys,
pooling and `Index1d("last")` skip padding. Pass all-True masks for batches without padding (or
export with `masks=False` for a model without mask inputs, which then assumes no padding). The
outputs are the network's outputs (`net.output_names`); their values at padded time steps are
unspecified, as in PyTorch.

The exporter is torch's TorchScript-based one (`dynamo=False`), which handles LSTMs with padding
(ONNX `LSTM` with `sequence_lens`). After exporting, the model is run with onnxruntime at sizes
other than the export example's and compared with PyTorch; a layer that does not export, or whose
export is only right at the example's sizes, is named in a `NetworkError`.
"""
from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from attnlab.core.errors import ArgumentError, AttnlabError, DataError, NetworkError
from attnlab.graph import Graph
from attnlab.graph.names import parse_port
from attnlab.io.onnx.culprits import example_shape, unexportable
from attnlab.io.onnx.model import finish_model, first_line, have, require, run_exporter, session
from attnlab.core.files import output_path
from attnlab.core.batching import as_batch
from attnlab.core.sequences import Padded, pad_sequences
from attnlab.core.spec import Spec

DEFAULT_OPSET = 17
MIN_OPSET = 14          # scaled_dot_product_attention (every attention layer) needs opset 14


def max_opset() -> int:
    """The newest opset torch's TorchScript-based exporter writes."""
    try:
        from torch.onnx import _constants
        return int(getattr(_constants, "ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET", 20))
    except ImportError:                   # a torch without the module: its long-standing limit
        return 20


def check_opset(opset) -> int:
    """`opset` as given to `export_onnx`, checked: a whole number in the supported range."""
    hi = max_opset()
    if isinstance(opset, bool) or not isinstance(opset, (int, np.integer)) or \
            not MIN_OPSET <= int(opset) <= hi:
        raise ArgumentError(f"export_onnx argument 'opset': expected a whole number from "
                            f"{MIN_OPSET} to {hi} (the ONNX opsets attnlab exports to with this "
                            f"torch), received {opset!r} ({type(opset).__name__}). Use "
                            f"opset={DEFAULT_OPSET} (the default) or another in that range.")
    return int(opset)


@dataclass
class OnnxExport:
    """What `export_onnx` wrote: the file, the ONNX input and output names, the dynamic axes,
    and the largest difference from PyTorch found by the check (None when not checked)."""

    path: Path
    inputs: list[str]
    outputs: list[str]
    dynamic_axes: dict[str, dict[int, str]] = field(default_factory=dict)
    max_error: float | None = None
    _example: Any = field(default=None, repr=False, compare=False)   # the exporter's inputs

    def feeds(self, *args, **kwargs) -> dict[str, np.ndarray]:
        """Network inputs (as for calling the network: by position or by name; tensors, lists
        of variable-length sequences or `al.Padded`) → the dict of numpy arrays that
        onnxruntime's `InferenceSession.run` takes, masks included."""
        return self._example.feeds(*args, **kwargs)


def export_onnx(net, path, example_inputs=None, *, masks=True, opset: int = DEFAULT_OPSET,
                dynamic_lengths: bool = True, check: bool = True, atol: float = 1e-4,
                rtol: float = 1e-4) -> OnnxExport:
    """Exports `net` to the ONNX file `path` (see the module docstring for its inputs).

    - `example_inputs`: data to trace with (as for calling the network); needed only for a
      network without input layers that has not run yet. By default random data of the input
      specs' sizes is made.
    - `masks`: True (a `<input>_mask` input for every sequence input), False (none), or a list
      of the input names that get one.
    - `opset`: the ONNX opset to write, from `MIN_OPSET` (14) to the newest torch's exporter
      writes (`max_opset()`); anything else is an `ArgumentError` naming that range.
    - `dynamic_lengths`: False fixes every sequence length to the example's (batch stays
      dynamic); use it for a layer that exports only at fixed lengths.
    - `check`: run the model with onnxruntime at other sizes and compare with PyTorch within
      `atol`/`rtol` (skipped with a warning when onnxruntime is not installed).
    """
    if not (isinstance(net, Graph) and isinstance(net, torch.nn.Module)):
        raise NetworkError(f"export_onnx() takes an attnlab Network, got {type(net).__name__}")
    opset = check_opset(opset)
    require("onnx")
    if not isinstance(path, (str, Path)) or not str(path):
        raise ArgumentError(f"export_onnx(path=...): expected a file path such as 'net.onnx', "
                            f"received {path!r} ({type(path).__name__}).")
    path = output_path(path, "export_onnx(path)", example="net.onnx")
    ex = _Example.make(net, example_inputs, masks)
    dyn = _dynamic_axes(net, ex, dynamic_lengths)
    with _export_mode(net):
        try:
            run_exporter(_Flat(net, ex).eval(), ex.flat(), path, ex.onnx_inputs, ex.out_names, dyn, opset,
                          fold=not _has_shared_parameters(net))
        except AttnlabError:
            raise
        except Exception as e:  # noqa: BLE001 - any exporter failure: find the layers that cause it
            raise unexportable(net, ex, dynamic_lengths, opset, atol, rtol, e) from e
        finish_model(path, ex, dyn)
        result = OnnxExport(path, list(ex.onnx_inputs), list(ex.out_names), dyn, _example=ex)
        if check:
            if have("onnxruntime"):
                try:
                    result.max_error = _check(net, ex, path, dynamic_lengths, atol, rtol)
                except _Mismatch as e:
                    raise unexportable(net, ex, dynamic_lengths, opset, atol, rtol, e) from None
            else:
                warnings.warn("onnxruntime is not installed, so the exported model was not "
                              "checked: pip install onnxruntime (or attnlab[onnx]).", stacklevel=3)
    return result


# ------------------------------------------------------------------------------ examples ---

class _Example:
    """The network's inputs as the exporter sees them: names, specs, which get a mask, data."""

    def __init__(self, net, names, specs, with_mask, data):
        self.net, self.names, self.specs, self.with_mask = net, names, specs, with_mask
        self.data = data                                  # name → (tensor, mask or None)
        self.out_names = list(net.output_names)
        self.onnx_inputs = []
        for n, m in zip(names, with_mask):
            self.onnx_inputs.append(n)
            if m:
                self.onnx_inputs.append(mask_name(n))
        self.vocab = {n: _vocab_of(net, n) for n in names}
        analysis = net.analyze()
        self.out_specs = {o: (analysis.out_specs.get(n) or {}).get(p)
                          for n, p, o in net.open_outputs()}

    @classmethod
    def make(cls, net, example_inputs, masks):
        if example_inputs is not None:
            args = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
            if not net.initialized:
                net.initialize(*args)
        elif not net.initialized:
            try:
                net.initialize()
            except NetworkError as e:
                if "example inputs" in str(e):
                    raise NetworkError("this network has no input layers and has not run yet, so "
                                       "its input sizes are unknown: pass example inputs, "
                                       "net.export_onnx(path, example_inputs=x).") from None
                raise
        names = list(net.input_names)
        specs = [_input_spec(net, n) for n in names]
        if masks is True:
            with_mask = [s.is_sequence for s in specs]
        elif masks in (False, None):
            with_mask = [False] * len(names)
        else:
            wanted = [masks] if isinstance(masks, str) else list(masks)
            unknown = [m for m in wanted if m not in names]
            if unknown:
                raise NetworkError(f"export_onnx(masks=...): unknown input(s) {unknown}; the "
                                   f"inputs are {', '.join(names)}.")
            not_seq = [m for m, s in zip(names, specs) if m in wanted and not s.is_sequence]
            if not_seq:
                raise NetworkError(f"export_onnx(masks=...): {not_seq} are not sequence inputs; "
                                   "only sequences have padding masks.")
            with_mask = [n in wanted for n in names]
        ex = cls(net, names, specs, with_mask, {})
        if example_inputs is not None:
            ex.data = ex._from_user(example_inputs)
        else:
            ex.data = ex.random(batch=2, lengths=[_example_length(s, 4) for s in specs])
        return ex

    def _from_user(self, example_inputs):
        if isinstance(example_inputs, dict):
            given = example_inputs
        else:
            args = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
            if len(args) != len(self.names):
                raise DataError(f"export_onnx: the network has {len(self.names)} input(s) "
                                f"({', '.join(self.names)}), the example has {len(args)}.")
            given = dict(zip(self.names, args))
        dtype = _dtype(self.net)
        data = {}
        for n, spec, m in zip(self.names, self.specs, self.with_mask):
            if n not in given:
                raise DataError(f"export_onnx: the example lacks input '{n}'.")
            x = given[n]
            checked = as_batch(x, spec, n, dtype)   # the forward pass's checks, before any tracing
            mask = None
            if spec.labels == "BT":                 # token ids: int64, as the forward takes them
                x, mask = checked
            elif isinstance(x, Padded):
                mask = x.mask
                x = x.data
            elif isinstance(x, (list, tuple)) and spec.is_sequence:
                x, mask = pad_sequences(x, dtype=dtype)
            x = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x)
            x = x if spec.labels == "BT" else x.to(dtype)
            if m and mask is None:
                mask = torch.ones(x.shape[0], x.shape[1], dtype=torch.bool)
            data[n] = (x, mask if m else None)
        return data

    def random(self, batch, lengths, seed=0):
        g = torch.Generator().manual_seed(seed)
        dtype = _dtype(self.net)
        data = {}
        for n, spec, m, t in zip(self.names, self.specs, self.with_mask, lengths):
            shape = example_shape(spec, batch, t)
            vocab = self.vocab[n]
            if vocab:
                x = torch.randint(0, vocab, shape, generator=g)
                x = x if spec.labels == "BT" else x.to(dtype)       # token ids stay int64
            else:
                x = torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
            mask = None
            if m:
                mask = torch.ones(batch, shape[1], dtype=torch.bool)
                if batch > 1 and shape[1] > 1:          # the last sequence is shorter
                    mask[-1, max(1, shape[1] // 2 + 1):] = False
            data[n] = (x, mask)
        return data

    def flat(self, data=None):
        """(data, mask, data, …) on the network's device."""
        data = self.data if data is None else data
        device = _device(self.net)
        out = []
        for n, m in zip(self.names, self.with_mask):
            x, mask = data[n]
            out.append(x.to(device))
            if m:
                out.append(mask.to(device))
        return tuple(out)

    def as_network_inputs(self, data):
        device = _device(self.net)
        return {n: Padded(x.to(device), mask.to(device)) if mask is not None else x.to(device)
                for n, (x, mask) in data.items()}

    def feeds(self, *args, **kwargs):
        if kwargs:
            args = (kwargs,)
        data = self._from_user(args[0] if len(args) == 1 and isinstance(args[0], dict) else args)
        return {k: v.cpu().numpy() for k, v in zip(self.onnx_inputs, self.flat(data))}

    def lengths(self):
        return [self.data[n][0].shape[1] if s.is_sequence else None
                for n, s in zip(self.names, self.specs)]


def mask_name(input_name: str) -> str:
    """The ONNX input name of a sequence input's padding mask."""
    return f"{input_name}_mask"


def _input_spec(net, name) -> Spec:
    layer = net.layer_map[parse_port(name)[0]]
    if layer.is_input:
        return layer.spec
    return net.data_specs[name]


def _vocab_of(net, input_name):
    """Token inputs (feeding an Embedding directly) get integer example data below the vocab."""
    src = parse_port(input_name)[0]
    layers = net.layer_map
    if not layers[src].is_input:
        layer = layers[src]
        return getattr(layer, "vocab", None) if isinstance(getattr(layer, "vocab", None), int) else None
    vocabs = [getattr(layers[d], "vocab", None) for (d, _), (s, _) in net.sources.items() if s == src]
    ints: list[int] = [v for v in vocabs if isinstance(v, int)]
    return min(ints) if ints else None


def _example_length(spec, default):
    return spec.time if spec.time is not None else default


def _device(net):
    p = next(iter(net.parameters()), None)
    return p.device if p is not None else torch.device("cpu")


def _dtype(net):
    p = next((p for p in net.parameters() if p.is_floating_point()), None)
    return p.dtype if p is not None else torch.get_default_dtype()


def _dynamic_axes(net, ex, dynamic_lengths):
    dyn = {}
    for n, spec, m in zip(ex.names, ex.specs, ex.with_mask):
        axes = {0: "batch"}
        if spec.is_sequence and dynamic_lengths and spec.time is None:
            axes[1] = f"{n}_time"
        dyn[n] = axes
        if m:
            dyn[mask_name(n)] = dict(axes)
    names = {"T": "time", "Q": "query_time", "K": "key_time"}
    for o in ex.out_names:
        spec = ex.out_specs.get(o)
        axes = {0: "batch"}
        if spec is not None:
            for i, (label, size) in enumerate(zip(spec.labels, spec.sizes)):
                if i and size is None and label in names:
                    axes[i] = f"{o}_{names[label]}"
        dyn[o] = axes
    return dyn


# ------------------------------------------------------------------------------ exporting ---

class _Flat(nn.Module):
    """The network with flat tensor inputs (data, mask, data, …) and a tuple of outputs."""

    def __init__(self, net, ex):
        super().__init__()
        self.net = net
        self._names = list(zip(ex.names, ex.with_mask))
        self._outs = ex.out_names

    def forward(self, *flat):
        it = iter(flat)
        given = {}
        for n, m in self._names:
            x = next(it)
            given[n] = Padded(x, next(it)) if m else x
        outs, _ = self.net.forward_with_masks(given)
        return tuple(outs[o] for o in self._outs)



def _has_shared_parameters(net) -> bool:
    """Whether a Parameter serves under two names (tied weights). The exporter writes such a
    tensor once, but constant folding would add a folded copy (e.g. the transpose a tied
    Dense multiplies by), so tied networks export without it: the tensor stays stored once."""
    named = list(net.named_parameters(remove_duplicate=False))
    return len({id(p) for _, p in named}) < len(named)


@contextlib.contextmanager
def _export_mode(net):
    """Eval mode without gradients for the export; every module's mode is restored after."""
    modes = [(m, m.training) for m in net.modules()]
    net.eval()
    try:
        with torch.no_grad(), _sdpa_for_onnx():
            yield
    finally:
        for m, t in modes:
            m.training = t


@contextlib.contextmanager
def _sdpa_for_onnx():
    """The TorchScript exporter has no grouped-query form of scaled_dot_product_attention:
    while exporting, repeat the key/value heads instead (the same numbers)."""
    original = F.scaled_dot_product_attention

    def sdpa(q, k, v, *a, enable_gqa=False, **kw):
        if enable_gqa and k.shape[-3] != q.shape[-3]:
            r = q.shape[-3] // k.shape[-3]
            k, v = k.repeat_interleave(r, dim=-3), v.repeat_interleave(r, dim=-3)
        return original(q, k, v, *a, **kw)

    F.scaled_dot_product_attention = sdpa  # type: ignore[assignment]  # restored below
    try:
        yield
    finally:
        F.scaled_dot_product_attention = original


class _Mismatch(Exception):
    pass


def _check_sizes(ex, dynamic_lengths):
    """Sizes to check at: another batch size and other (different) lengths per input."""
    lengths = []
    for i, (n, spec) in enumerate(zip(ex.names, ex.specs)):
        t = ex.data[n][0].shape[1] if spec.is_sequence else None
        if t is not None and dynamic_lengths and spec.time is None:     # a free length
            t = t + 3 + 2 * i
        lengths.append(t)
    return 3, lengths


def _check(net, ex, path, dynamic_lengths, atol, rtol) -> float:
    try:
        sess = session(path)
    except Exception as e:  # noqa: BLE001
        raise _Mismatch(f"onnxruntime cannot open the exported model: {first_line(e)}") from None
    worst = 0.0
    batch, lengths = _check_sizes(ex, dynamic_lengths)
    trials = [ex.data, ex.random(batch, lengths, seed=1)]
    for data in trials:
        try:
            ref, _ = net.forward_with_masks(ex.as_network_inputs(data))
        except AttnlabError:
            continue      # the network itself refuses these sizes (e.g. Index1d(k) with T <= k)
        feeds = {k: v.cpu().numpy() for k, v in zip(ex.onnx_inputs, ex.flat(data))}
        try:
            got = sess.run(list(ex.out_names), feeds)
        except Exception as e:  # noqa: BLE001
            raise _Mismatch(f"onnxruntime fails at {_sizes_text(data)}: {first_line(e)}") from None
        for name, g in zip(ex.out_names, got):
            r = ref[name].detach().cpu().numpy()
            if r.shape != g.shape:
                raise _Mismatch(f"output '{name}' is {'×'.join(map(str, g.shape))} in ONNX but "
                                f"{'×'.join(map(str, r.shape))} in PyTorch at {_sizes_text(data)}")
            err = float(np.max(np.abs(r.astype(np.float64) - g.astype(np.float64)))) if r.size else 0.0
            if not np.allclose(g, r, atol=atol, rtol=rtol):
                raise _Mismatch(f"output '{name}' differs from PyTorch by up to {err:.3g} at "
                                f"{_sizes_text(data)}")
            worst = max(worst, err)
    return worst


def _sizes_text(data):
    parts = []
    for n, (x, _) in data.items():
        parts.append(f"{n} {'×'.join(map(str, x.shape))}")
    return ", ".join(parts)


