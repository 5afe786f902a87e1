"""Naming the layers that do not export: each layer exported alone, with its weights and at
its input sizes, by the module calling convention, and checked at other sizes."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from attnlab.graph.convention import call
from attnlab.core.errors import AttnlabError, NetworkError
from attnlab.graph import Graph
from attnlab.io.onnx.model import first_line, have, run_exporter, session
from attnlab.core.spec import Spec

__all__ = ["unexportable", "example_shape", "FIXED"]


def example_shape(spec: Spec, batch, time):
    fill = {"B": batch, "T": time, "Q": time, "K": time, "S": 8, "C": 4, "H": 2}
    return tuple(s if s is not None else fill.get(l, 4) for l, s in zip(spec.labels, spec.sizes))


def unexportable(net, ex, dynamic_lengths, opset, atol, rtol, cause) -> NetworkError:
    culprits = _probe_network(net, net.analyze(), "", ex.with_mask and any(ex.with_mask),
                              dynamic_lengths, opset, atol, rtol)
    reason = first_line(cause)
    if not culprits:
        return NetworkError(f"cannot export the network to ONNX: {reason}. Each layer exports on "
                            "its own, so it is the combination that fails: try "
                            "dynamic_lengths=False (every length fixed to the example's), another "
                            f"opset than {opset}, or export the parts of the network separately.")
    lines = "\n".join(f"  - '{name}' ({kind}): {why}" for name, kind, why in culprits)
    sizes_only = dynamic_lengths and all(why.endswith(FIXED) for _, _, why in culprits)
    fix = " Replace them, or leave them out of the exported network."
    if sizes_only:
        fix = (" They export only at fixed sequence lengths: export with dynamic_lengths=False "
               "to fix every length to the example's, or replace them.")
    elif any(why.endswith(FIXED) for _, _, why in culprits):
        fix += " (Layers that only fix a size export with dynamic_lengths=False.)"
    return NetworkError(f"cannot export the network to ONNX: {len(culprits)} layer(s) cannot be "
                        f"exported{' with dynamic sequence lengths' if sizes_only else ''}:\n"
                        f"{lines}\n{fix.strip()}")


def _probe_network(net, analysis, prefix, masks, dynamic_lengths, opset, atol, rtol):
    """Exports every layer alone (with its weights, at its input sizes) to name those that fail."""
    culprits: list = []
    for name in analysis.order:
        layer = net.layer_map[name]
        if layer.is_input or name not in net.layer_modules or analysis.out_specs.get(name) is None:
            continue
        specs = analysis.in_specs[name]
        why = _probe_layer(layer, net.layer_modules[name], specs, masks, dynamic_lengths, opset,
                           atol, rtol)
        if why is None:
            continue
        if isinstance(layer, Graph):
            nested: Any = layer                   # a Network (this module sits below network.py)
            try:
                inner = nested.analyze_as_layer(specs)
            except AttnlabError:
                inner = None
            found = [] if inner is None else _probe_network(
                layer, inner, f"{prefix}{name}/", masks, dynamic_lengths, opset, atol, rtol)
            if found:
                culprits += found
                continue
        culprits.append((prefix + name, layer.type_name, why))
    return culprits


FIXED = "the export fixed a size that should stay dynamic"


class _OneLayer(nn.Module):
    """One layer's module alone, called by the module calling convention: the flat inputs are
    each port's tensor, followed by its mask for the ports in `mask_ports`; the outputs are
    the module's, as a tuple."""

    def __init__(self, layer, mod, ports, mask_ports):
        super().__init__()
        self.mod = mod
        self._layer = (layer,)
        self._ports, self._mask_ports = ports, mask_ports

    def forward(self, *flat):
        layer = self._layer[0]
        it = iter(flat)
        xs, ms = [], []
        for p in self._ports:
            xs.append(next(it))
            ms.append(next(it) if p in self._mask_ports else None)
        outs, _ = call(layer, self.mod, xs, ms)
        return outs


def _probe_layer(layer, mod, specs, masks, dynamic_lengths, opset, atol, rtol):
    """None when the layer exports and matches PyTorch at other sizes, else the reason."""
    ports = list(layer.input_ports)
    mask_ports = {p for p in ports if masks and specs[p].is_sequence}
    vocab = getattr(layer, "vocab", None) if isinstance(getattr(layer, "vocab", None), int) else None
    p = next(iter(mod.parameters()), None) if isinstance(mod, nn.Module) else None
    device = p.device if p is not None else torch.device("cpu")
    dtype = p.dtype if p is not None and p.is_floating_point() else torch.get_default_dtype()

    def data(batch, time, seed):
        g = torch.Generator().manual_seed(seed)
        flat = []
        for i, p in enumerate(ports):
            t = specs[p].time if specs[p].time is not None else time + (2 * i if dynamic_lengths else 0)
            shape = example_shape(specs[p], batch, t)
            x = torch.randint(0, vocab, shape, generator=g).float() if vocab else torch.randn(shape, generator=g)
            flat.append(x.to(device, dtype))
            if p in mask_ports:
                m = torch.ones(batch, shape[1], dtype=torch.bool)
                if batch > 1 and shape[1] > 1:
                    m[-1, shape[1] // 2 + 1:] = False
                flat.append(m.to(device))
        return tuple(flat)

    wrapper = _OneLayer(layer, mod, ports, mask_ports).eval()
    names, dyn = [], {}
    for p in ports:
        names.append(p)
        axes = {0: "batch"}
        if specs[p].is_sequence and dynamic_lengths and specs[p].time is None:
            axes[1] = f"{p}_time"
        dyn[p] = axes
        if p in mask_ports:
            names.append(f"{p}_mask")
            dyn[f"{p}_mask"] = dict(axes)
    example = data(2, 4, 0)
    try:
        with torch.no_grad():
            n_out = len(wrapper(*example))
    except Exception:  # noqa: BLE001 - cannot even run alone at these sizes: no verdict
        return None
    outs = [f"out{i}" for i in range(n_out)]
    for o in outs:
        dyn[o] = {0: "batch"}
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "layer.onnx"
        try:
            run_exporter(wrapper, example, path, names, outs, dyn, opset)
        except Exception as e:  # noqa: BLE001
            return f"the exporter fails: {first_line(e)[:300]}"
        if not have("onnxruntime"):
            return None
        try:
            sess = session(path)
            present = {i.name for i in sess.get_inputs()}
            for batch, time, seed in ((2, 4, 0), (3, 9, 1)):
                flat = data(batch, time, seed)
                with torch.no_grad():
                    try:
                        ref = wrapper(*flat)
                    except Exception:  # noqa: BLE001
                        continue
                feeds = {n: x.cpu().numpy() for n, x in zip(names, flat) if n in present}
                got = sess.run(outs, feeds)
                for r, g in zip(ref, got):
                    r = r.detach().cpu().numpy()
                    if r.shape != g.shape or not np.allclose(g, r, atol=atol, rtol=rtol):
                        shape_note = "" if r.shape == g.shape else \
                            f" (ONNX {'×'.join(map(str, g.shape))}, PyTorch {'×'.join(map(str, r.shape))})"
                        return (f"its ONNX form differs from PyTorch at other sizes{shape_note}: "
                                f"{FIXED}")
        except Exception:  # noqa: BLE001
            return f"its ONNX form fails at other sizes than the example's: {FIXED}"
    return None


