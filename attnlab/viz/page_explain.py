"""The explanations a page shows for one sample: attributions over the input (attention
rollout, integrated gradients), the logit lens of a causal language model, and the effect of
ablating each attention head. The numbers come from `attnlab.explain` and `net.trace`; this
module only chooses what to explain (the target) and turns the results into the page's JSON.

One home for `attnlab explain` and for the explanations panel of `attnlab view`."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnlab.core.errors import ArgumentError, AttnlabError, DataError
from attnlab.graph.names import format_port, parse_port
from attnlab.layers.pooling import GlobalAvgPool1d, GlobalMaxPool1d, Index1d
from .page_attention import attention_modules, sample_inputs

METHODS = ("rollout", "ig", "lens", "heads")
TITLES = {"rollout": "attention rollout", "ig": "integrated gradients", "lens": "logit lens",
          "heads": "head ablation"}
MAX_LENS_POSITIONS = 64           # the logit-lens table shows the last this many positions


def parse_methods(text: str, who: str = "--method") -> tuple[str, ...]:
    """`--method`: 'all', one of METHODS, or several separated by commas → the methods, in
    METHODS order. 'none' (view only asks for it) gives (). `who` names the argument."""
    words = [w.strip().lower() for w in str(text).split(",") if w.strip()]
    if words == ["none"]:
        return ()
    if "all" in words:
        words = list(METHODS)
    unknown = [w for w in words if w not in METHODS]
    if unknown or not words:
        what = f"unknown method {unknown[0]!r}" if unknown else "no method given"
        raise ArgumentError(f"{who}: {what}; choose from {', '.join(METHODS)} or all "
                            "(several separated by commas, e.g. 'rollout,ig')")
    return tuple(m for m in METHODS if m in words)


@dataclass(frozen=True)
class Target:
    """What the explanations explain: one number of the network's first output, item 0 of
    the batch — `index` of a B×C output, or `index` at time step `position` of a B×T×C one."""
    output: str
    position: int | None
    index: int
    classes: int

    def of(self, outputs):
        """The target's value in `outputs` (what the network returns), one per batch item."""
        y = _first(outputs, self.output)
        return y[:, self.index] if self.position is None else y[:, self.position, self.index]

    @property
    def argument(self):
        """The target as `attnlab.explain` takes it: a class, or (position, class)."""
        return self.index if self.position is None else (self.position, self.index)

    def describe(self) -> str:
        where = "" if self.position is None else f" at position {self.position}"
        return f"output '{self.output}', class {self.index}{where}"


@dataclass(frozen=True)
class Job:
    """What each method is given: the network (in eval mode), the sample's inputs, the
    target, integrated gradients' steps, and the vocabulary (id → token) for the lens."""
    net: Any
    inputs: dict
    target: Target
    steps: int
    vocabulary: dict


def _first(outputs, name: str):
    """The output `name` of what a network returns (a tensor for one output, else a dict)."""
    return outputs[name] if isinstance(outputs, dict) else outputs


def choose_target(net, inputs: dict, index: int | None = None) -> Target:
    """The target for `inputs`: the network's first output, at its last time step for a
    sequence output, class `index` or else the one the network predicts."""
    import torch

    name = net.output_names[0]
    with torch.no_grad():
        y = _first(net(inputs), name)
    if y.ndim not in (2, 3):
        raise DataError(f"output '{name}' is {'×'.join(map(str, y.shape))}: the explanations "
                        "need a B×C or B×T×C output to choose a class from (a classifier's "
                        "scores or a language model's logits)")
    position = None if y.ndim == 2 else y.shape[1] - 1
    row = y[0] if position is None else y[0, position]
    classes = int(row.shape[-1])
    if index is None:
        index = int(row.argmax())
    elif not 0 <= index < classes:
        raise ArgumentError(f"--target {index}: output '{name}' has {classes} classes; give "
                            f"one in 0…{classes - 1}, or leave --target out for the predicted one")
    return Target(name, position, int(index), classes)


def explanations(net, sample, labels=None, methods=METHODS, target: int | None = None,
                 steps: int = 64, strict: bool = False, vocabulary=None) -> dict:
    """The page's `explanations` object for `sample` (as `attention_maps` takes it): the
    target, then one entry per method. A method that does not apply to the network (the logit
    lens of a classifier, rollout without attention) is a note on the page, or with
    `strict=True` (methods the user named) the error itself. `methods`: names from METHODS,
    or one string as `--method` takes it ("all", "rollout,ig"). `vocabulary` (id → token)
    names the tokens the logit lens predicts."""
    import torch

    methods = parse_methods(methods if isinstance(methods, str) else ",".join(methods) or "none",
                            who="methods")
    inputs = sample_inputs(net, sample)
    was_training = net.training
    net.eval()
    try:
        tgt = choose_target(net, inputs, target)
        token = (vocabulary or {}).get(tgt.index)
        out: dict = {"target": {"output": tgt.output, "position": tgt.position,
                                "index": tgt.index, "classes": tgt.classes,
                                "text": tgt.describe() + (f" (token {token!r})" if token else "")},
                     "inputs": _input_axes(net, inputs, labels or {}),
                     "attributions": [], "lens": None, "heads": None, "notes": []}
        for method in methods:
            try:
                with torch.set_grad_enabled(method == "ig"):
                    _RUN[method](Job(net, inputs, tgt, steps, vocabulary or {}), out)
            except AttnlabError as e:
                if strict:
                    raise
                out["notes"].append(f"{TITLES[method]}: {e}")
    finally:
        net.train(was_training)
    return out


# ----------------------------------------------------------------------------- inputs ---

def _input_axes(net, inputs: dict, labels: dict) -> dict:
    """Per input: its kind (tokens, time, image, features) and one label per position."""
    tokens = set(net.token_inputs)
    out: dict[str, dict] = {}
    for name, x in inputs.items():
        if name in tokens:
            ids = x[0].tolist()
            given = labels.get(name)
            text = [str(s) for s in given[:len(ids)]] if given and len(given) >= len(ids) \
                else [str(i) for i in ids]
            out[name] = {"kind": "tokens", "labels": text}
        elif x.ndim == 3:
            out[name] = {"kind": "time", "labels": [str(t) for t in range(x.shape[1])]}
        elif x.ndim == 4:
            out[name] = {"kind": "image", "labels": None, "size": list(x.shape[2:])}
        else:
            out[name] = {"kind": "features", "labels": [str(c) for c in range(x.shape[-1])]}
    return out


# -------------------------------------------------------------------- head ablation ---

def head_ablation(net, inputs: dict, target: Target) -> dict:
    """Each head of each attention layer set to 0 (its `heads` port, before the output
    projection, patched through `net.trace`), one run per head: the change of the target's
    value, and of the whole first output relative to its size."""
    import torch

    mods = attention_modules(net)
    if not mods:
        raise DataError("the network has no attention layer whose heads could be ablated")
    with torch.no_grad():
        clean = net.trace(inputs).outputs
        base = float(target.of(clean)[0])
        y0 = _first(clean, target.output)[0].float()
        scale = float(y0.norm()) or 1.0
        layers = []
        for display, name, owner, _mod in mods:
            n = int(owner.layer_map[name].num_heads)
            effects, changes, heads = [], [], format_port(display, "heads")
            for h in range(n):
                patched = net.trace(inputs, patch={heads: _without_head(h)}).outputs
                effects.append(_num(float(target.of(patched)[0]) - base))
                y = _first(patched, target.output)[0].float()
                changes.append(_num(float((y - y0).norm()) / scale))
            layers.append({"layer": display, "heads": n, "effects": effects,
                           "output_change": changes})
    return {"baseline": _num(base), "layers": layers,
            "metric": f"change of {target.describe()} when the head is set to 0"}


def _without_head(h: int):
    """A patch of a `heads` value (B×Tq×H×dv) that sets head `h` to 0."""
    def patch(value):
        keep = value.new_ones(value.shape[2])
        keep[h] = 0
        return value * keep[:, None]
    return patch


def _num(v: float) -> float | None:
    """A number for the page's JSON (which has no NaN or infinity), to 6 significant digits."""
    return float(f"{v:.6g}") if math.isfinite(v) else None


def _heads(job, out):
    out["heads"] = head_ablation(job.net, job.inputs, job.target)


# ---------------------------------------------------- attnlab.explain's results as data ---

def _rollout(job, out):
    from attnlab import explain
    net, inputs, target = job.net, job.inputs, job.target
    mixing = explain.rollout(net, inputs)
    layers = ", ".join(mixing.layers)
    for basis, matrix in mixing.terms.items():
        m = matrix[0].detach().float().cpu()                       # T×Tbasis
        row, which = _row(net, m, target)
        out["attributions"].append(_positions(
            "rollout", basis, row, mixing.kind, out["inputs"], signed=False,
            caption=f"Attention rollout (Abnar & Zuidema) through {layers}: how much of each "
                    f"position of {basis} the output carries, {which}."))


def _row(net, m, target):
    """The row of a rollout matrix (T×Tbasis) that the target reads, and its words: the
    target's own position when the output is this sequence; else the step that an `Index1d`
    before the output takes, or the mean for a `GlobalAvgPool1d`; else the mean, said so."""
    if target.position is not None and m.shape[0] == target.position + 1:
        return m[target.position], f"the row of position {target.position}"
    reader = _reader(net, target.output)
    if isinstance(reader, Index1d):
        k = 0 if reader.index == "first" else m.shape[0] - 1 if reader.index == "last" \
            else reader.index
        if isinstance(k, int) and -m.shape[0] <= k < m.shape[0]:
            return m[k], f"the row of position {k % m.shape[0]}, which '{reader.name}' takes"
    if isinstance(reader, GlobalAvgPool1d):
        return m.mean(0), f"the mean of its rows, which '{reader.name}' averages"
    what = f" through '{reader.name}' ({reader.type_name})" if reader is not None else ""
    return m.mean(0), (
        f"the mean over its {m.shape[0]} positions (the output reads them{what}, so no one "
        "row is the target's)")


def _reader(net, output: str):
    """The layer through which `output` reads a sequence: back from the output by first
    inputs to the first layer that reduces time (`Index1d`, a pooling); None when none is met."""
    name, seen = parse_port(output)[0], set()
    while name in net.layer_map and name not in seen:
        seen.add(name)
        layer = net.layer_map[name]
        if isinstance(layer, (Index1d, GlobalAvgPool1d, GlobalMaxPool1d)):
            return layer
        src = net.source(name, layer.input_ports[0]) if layer.input_ports else None
        if src is None:
            return None
        name = src[0]
    return None


def _ig(job, out):
    net, inputs, target, steps = job.net, job.inputs, job.target, job.steps
    from attnlab import explain
    # several outputs: the target as a function of them, which says which output it reads
    several = len(net.output_names) > 1
    a = explain.integrated_gradients(net, inputs, target.of if several else target.argument,
                                     steps=steps)
    total, delta = float(a.values[0].sum()), float(a.delta[0])
    out["attributions"].append(_positions(
        "ig", a.input_name, a.positions(0), a.kind, out["inputs"], signed=True,
        caption=f"Integrated gradients ({steps} steps from a zero baseline"
                f"{' of the embeddings' if a.kind == 'tokens' else ''}): each "
                f"{_unit(a.kind)}'s share of the target's change; they sum to "
                f"{total:.4g}, and the target changes by {delta:.4g} from the baseline."
                + _held(inputs, a.input_name)))


def _held(inputs: dict, name: str) -> str:
    others = [n for n in inputs if n != name]
    return f" The other inputs ({', '.join(others)}) are held as given." if others else ""


def _unit(kind: str) -> str:
    return {"tokens": "token", "sequence": "time step", "image": "pixel"}.get(kind, "feature")


def _positions(method, name, values, kind, axes, signed, caption) -> dict:
    """One attribution over the positions of input `name` (or of the layer where they enter):
    a grid for an image's pixels or patches, else one value per position with the input's
    labels. `kind`: what attnlab.explain says the positions are, for a layer's."""
    v = values.detach().float().cpu()
    axis = axes.get(name) or {}
    kind = "time" if kind == "sequence" else axis.get("kind", kind)
    image = axis.get("size") or next((a["size"] for a in axes.values() if a.get("size")), None)
    size = list(v.shape) if v.ndim == 2 else _grid(v.numel(), image) if kind == "image" \
        else None
    labels = axis.get("labels")
    if labels is not None and len(labels) != v.numel():
        labels = None
    if kind == "image" and size is None and v.ndim == 1 and _grid(v.numel() - 1, image):
        # a class token before the patches (ViT): the patches as the grid, its share in words
        size = _grid(v.numel() - 1, image)
        caption += f" The class token before the patches holds {float(v[0]):.3g} of it."
        v = v[1:]
    return {"method": method, "title": TITLES[method], "input": name, "kind": kind,
            "labels": labels, "values": _values(v), "size": size, "signed": signed,
            "caption": caption}


def _grid(n: int, image_size) -> list[int] | None:
    """Rows × columns of `n` patches of an image of `image_size` (H, W), when they tile it."""
    if not image_size:
        return None
    h, w = image_size
    rows = round(math.sqrt(n * h / w))
    return [rows, n // rows] if rows and rows * (n // rows) == n else None


def _lens(job, out):
    from attnlab import explain
    net, inputs = job.net, job.inputs
    lens = explain.logit_lens(net, inputs)
    vocabulary = job.vocabulary
    what = "its token, from the tokenizer's vocabulary" if vocabulary else "its id"
    p = lens.probabilities(0)                                          # blocks×T×V
    n = p.shape[1]
    first = max(0, n - MAX_LENS_POSITIONS)        # a long input: its last positions, nearest
    p = p[:, first:]                              # the prediction
    best = p.max(-1)
    axis: dict = next((a for a in out["inputs"].values() if a["kind"] == "tokens"), {})
    tokens = axis.get("labels") or [str(i) for i in range(n)]
    cut = f" The last {n - first} of its {n} positions." if first else ""
    out["lens"] = {
        "blocks": [str(b) for b in lens.blocks],
        "positions": tokens[first:],
        "top": [[_token(int(best.indices[b, i]), float(best.values[b, i]), vocabulary)
                 for i in range(p.shape[1])] for b in range(p.shape[0])],
        "caption": "Each block's output read through the final norm and the head: the "
                   f"token it would predict next at each position ({what}) and its "
                   f"probability; the last row is the network's own prediction.{cut}"}


def _token(i: int, p: float, vocabulary: dict) -> dict:
    return {"id": i, "token": vocabulary.get(i, str(i)), "p": _num(p)}


def _values(a) -> list:
    return [_num(float(v)) for v in np.asarray(a, dtype=np.float64).ravel()]


_RUN = {"rollout": _rollout, "ig": _ig, "lens": _lens, "heads": _heads}
