"""The attention maps a page shows: every attention layer's weights for one sample, asked of
its module per call (`need_weights=True`), with token labels traced back to the inputs."""
from __future__ import annotations

import numpy as np

from attnlab.graph.analysis import analyze
from attnlab.core.batching import id_inputs
from attnlab.core.errors import DataError
from attnlab.core.sequences import MASK_KEYS, follows_hugging_face, hugging_face_inputs
from ..graph import Graph
from ..graph.names import parse_port

MAX_STEPS = 256                   # attention maps are cut to this many queries and keys


def attention_modules(net, prefix=""):
    """(display name, module) of every attention layer that can return its weights, nested
    networks included ('outer/inner')."""
    from ..functional import AttentionModule    # torch, only when a page shows attention

    found = []
    for name, layer in net.layer_map.items():
        if isinstance(layer, Graph) and name in net.layer_modules:      # a nested Network
            found += attention_modules(net.layer_modules[name], f"{prefix}{name}/")
            continue
        mod = net.layer_modules[name] if name in net.layer_modules else None
        # attnlab's attention modules take need_weights=True per call
        if isinstance(mod, AttentionModule) and getattr(layer, "num_heads", None):
            found.append((prefix + name, name, net, mod))
    return found


def attention_maps(net, sample, labels=None, item: int = 0) -> list[dict]:
    """The attention weights of every attention layer for `sample`, item `item` of its batch:
    `[{"layer", "heads", "tq", "tk", "weights": heads×Tq×Tk nested lists, "query_labels",
    "key_labels"}]`. `sample`: one array (a network with one input) or a dict by input name;
    an array without its batch dimension gets one. `labels`: a dict input name → one label
    per position (tokens), used on the axes of attention whose queries or keys come from
    that input; positions otherwise."""
    import torch

    inputs = sample_inputs(net, sample)
    if not net.initialized:       # build the modules first: the hooks go on them
        if any(l.is_input for l in net.layer_map.values()):
            net.initialize()
        else:
            net.initialize(inputs)
    mods = attention_modules(net)
    if not mods:
        return []
    captured: dict[str, torch.Tensor] = {}
    handles = []

    def ask_weights(module, args, kwargs):
        return args, {**kwargs, "need_weights": True}          # a supported per-call option

    def hook_for(display, wanted_already):
        def hook(module, args, output):
            captured[display] = output[1].detach()
            return output if wanted_already else output[0]     # the plan expects one output
        return hook

    try:
        for display, _name, _owner, mod in mods:
            handles.append(mod.register_forward_pre_hook(ask_weights, with_kwargs=True))
            handles.append(mod.register_forward_hook(hook_for(display, mod.scores)))
        was_training = net.training
        net.eval()
        try:
            with torch.no_grad():
                net(inputs)
        finally:
            net.train(was_training)
    finally:
        for h in handles:
            h.remove()
    out = []
    for display, name, owner, _mod in mods:
        scores = captured.get(display)
        if scores is None:
            continue
        w = scores[item].float().cpu().numpy()               # heads×Tq×Tk
        if w.ndim != 3:
            continue
        w = w[:, :MAX_STEPS, :MAX_STEPS]
        heads, tq, tk = w.shape
        qlab, klab = _axis_labels(owner, name, labels, tq, tk)
        out.append({"layer": display, "type": owner.layer_map[name].type_name, "heads": heads,
                    "tq": tq, "tk": tk, "weights": np.round(w, 4).tolist(),
                    "query_labels": qlab, "key_labels": klab})
    return out


def sample_inputs(net, sample) -> dict:
    """`sample` (one array, or a dict by input name; one item may leave out its batch axis)
    as the network's inputs: float32 tensors, token ids int64."""
    import torch

    names = list(net.input_names)
    if not names:
        raise DataError("the network has no inputs to give the sample to")
    if follows_hugging_face(net):
        sample = _hugging_face_sample(names, sample)
    if not isinstance(sample, dict):
        if len(names) != 1:
            raise DataError(f"the sample is one array, but the network has {len(names)} inputs "
                            f"({', '.join(names)}). Give an .npz file with one array per input, "
                            f"named {', '.join(repr(n) for n in names)}.")
        sample = {names[0]: sample}
    missing = [n for n in names if n not in sample]
    if missing:
        raise DataError(f"the sample has no array for input(s) {', '.join(repr(n) for n in missing)} "
                        f"(it has {', '.join(repr(k) for k in sample) or 'none'}). Name the arrays "
                        "of the .npz file after the network's inputs.")
    a = analyze(net, net.data_specs)
    tokens = {n for n, ids in zip(names, id_inputs(net)) if ids}
    out = {}
    for n in names:
        x = np.asarray(sample[n])
        if x.dtype == object or not (np.issubdtype(x.dtype, np.number) or x.dtype == bool):
            raise DataError(f"input '{n}': the sample must be numbers, received {x.dtype}")
        spec = _input_spec(net, a, n)
        if spec is not None and x.ndim == len(spec.sizes) - 1:
            x = x[None]                                          # one item: add the batch axis
        if spec is not None and x.ndim != len(spec.sizes):
            raise DataError(f"input '{n}': expected {spec} ({len(spec.sizes)} dimensions, or "
                            f"{len(spec.sizes) - 1} for one item), received "
                            f"{'×'.join(map(str, x.shape))}.")
        if n in tokens and not np.array_equal(x, np.round(x)):
            raise DataError(f"input '{n}' takes token ids, but the sample has numbers that "
                            "are not whole; save the ids as integers (np.int64)")
        # token ids stay integers (an explanation patches their embedding, never the ids)
        out[n] = torch.as_tensor(x, dtype=torch.int64 if n in tokens else torch.float32)
    return out


def vocabulary_labels(net, sample, labels=None, vocabulary=None) -> dict:
    """`labels` (input name → one label per position), with each token input that has none
    read through `vocabulary` (id → token; an id it lacks stays a number)."""
    out = dict(labels or {})
    if not vocabulary:
        return out
    inputs = sample_inputs(net, sample)
    for name, ids in zip(net.input_names, id_inputs(net)):
        if ids and name not in out and name in inputs:
            out[name] = [vocabulary.get(i, str(i)) for i in inputs[name][0].tolist()]
    return out


def _hugging_face_sample(names: list, sample):
    """A Hugging Face model's sample: one array is its `input_ids`, and `token_type_ids` left
    out are zeros, as in transformers (`hugging_face_inputs`). A sample is one item, with no
    padding, so a mask is refused rather than dropped."""
    if not isinstance(sample, dict) and "input_ids" in names:
        sample = {"input_ids": sample}
    if not isinstance(sample, dict):
        return sample
    masks = [k for k in MASK_KEYS if k in sample]
    if masks:
        raise DataError(f"the sample holds '{masks[0]}', but a sample is one item without "
                        f"padding: leave '{masks[0]}' out of the .npz file")
    return hugging_face_inputs(sample, names)


def _input_spec(net, a, name):
    layer_name = parse_port(name)[0]
    layer = net.layer_map.get(layer_name)
    if layer is None:
        return None
    if layer.is_input:
        return next(iter((a.out_specs.get(layer_name) or {}).values()), None)
    return (net.data_specs or {}).get(name)


def _axis_labels(net, name, labels, tq, tk):
    """Token labels for the queries and keys of attention layer `name` in `net`: those of the
    input that its query (key) port traces back to through first inputs, when they fit."""
    if not labels:
        return None, None
    layers = net.layer_map
    layer = layers[name]
    ports = layer.input_ports
    qport = "query" if "query" in ports else ports[0]
    kport = "key" if "key" in ports else ports[0]

    def trace(port):
        seen = set()
        cur, p = name, port
        while net.source(cur, p) is not None and cur not in seen:
            seen.add(cur)
            cur, _ = net.source(cur, p)
            if layers[cur].is_input:
                return cur
            ins = layers[cur].input_ports
            if not ins:
                return None
            p = ins[0]
        return None

    def fit(src, n):
        lab = labels.get(src) if src else None
        return [str(s) for s in lab] if lab is not None and len(lab) >= n else None

    q, k = fit(trace(qport), tq), fit(trace(kport), tk)
    return (q[:tq] if q else None), (k[:tk] if k else None)

