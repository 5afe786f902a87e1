"""`save_pretrained`: a network back in the Hugging Face layout, exactly or not at all.

What is written is checked first: the config.json about to be written is built into its
family's network (as `from_pretrained` would build it) and compared with the network layer by
layer — kind, options (`layer.config()`), connections, ties. Edits a config can say are said:
a classifier with another number of labels, blocks removed from the end, another vocabulary,
an output projection tied or untied. Any other difference is refused, naming each one; nothing
is written then.

The files are written by `writing.py`: config.json and model.safetensors together, the
folder's other files kept.
"""
from __future__ import annotations

import dataclasses
import inspect
import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

import torch

from attnlab.core.errors import ArgumentError, AttnlabError
from .config import CheckpointError, Config
from .weights import Weight, check_table, collect
from .writing import target, write

MAX_DIFFERENCES = 20


@dataclass(frozen=True)
class Sayable:
    """What a family's config.json can say about an edited network.

    blocks: (config key, pattern of a block's layer names whose group 1 is the block's index,
    the key whose value it takes when absent) — blocks removed from the end; vocab: (config
    key, the token embedding's layer); labels: the classifier's layer (`num_labels`,
    `id2label`); head: (output projection, the embedding it may share its weight with) —
    `tie_word_embeddings`; head_in_file: the same pair where the file says it (T5: a head
    whose own tensor differs from the embedding's is kept apart); hints: (pattern of layer
    names, option or "" for the layer's kind, the config key that sets it), named in errors."""

    blocks: tuple[tuple[str, str, str | None], ...] = ()
    vocab: tuple[str, str] | None = None
    labels: str | None = None
    head: tuple[str, str] | None = None
    head_in_file: tuple[str, str] | None = None
    hints: tuple[tuple[str, str, str], ...] = ()


_LLAMA = Sayable(
    blocks=(("num_hidden_layers", r"^layers\.(\d+)\.", None),),
    vocab=("vocab_size", "embed_tokens"), head=("lm_head", "embed_tokens"),
    hints=((r"\.mlp\.gate_up_proj$", "activation", "hidden_act"), (r"norm$", "eps", "rms_norm_eps"),
           (r"\.self_attn$", "dropout", "attention_dropout"),
           (r"\.self_attn$", "rotary", "rope_theta"), (r"\.self_attn$", "window", "sliding_window"),
           (r"\.mlp\.gate_up_proj$", "units", "intermediate_size")))

_ENCODER = ((r"\.act$", "", "hidden_act"), (r"dropout$", "p", "hidden_dropout_prob"),
            (r"\.attention\.(self|attention)$", "dropout", "attention_probs_dropout_prob"),
            (r"(LayerNorm|layernorm\w*)$", "eps", "layer_norm_eps"),
            (r"intermediate\.dense$", "out", "intermediate_size"))

SAYABLE: dict[str, Sayable] = {
    "gpt2": Sayable(
        blocks=(("n_layer", r"^h\.(\d+)\.", None),), vocab=("vocab_size", "wte"),
        labels="score", head=("lm_head", "wte"),
        hints=((r"\.mlp\.act$", "", "activation_function"), (r"\.attn$", "dropout", "attn_pdrop"),
               (r"(resid_dropout|mlp\.dropout)$", "p", "resid_pdrop"), (r"^drop$", "p", "embd_pdrop"),
               (r"(ln_1|ln_2|ln_f)$", "eps", "layer_norm_epsilon"),
               (r"\.attn$", "scale", "scale_attn_weights"), (r"^wpe$", "max_length", "n_positions"),
               (r"\.mlp\.c_fc$", "out", "n_inner"))),
    "bert": Sayable(
        blocks=(("num_hidden_layers", r"^encoder\.layer\.(\d+)\.", None),),
        vocab=("vocab_size", "embeddings.word_embeddings"), labels="classifier",
        head=("cls.predictions.decoder", "embeddings.word_embeddings"),
        hints=_ENCODER + ((r"position_embeddings$", "max_length", "max_position_embeddings"),)),
    "vit": Sayable(
        blocks=(("num_hidden_layers", r"^encoder\.layer\.(\d+)\.", None),), labels="classifier",
        hints=((r"^pooler\.activation$", "", "pooler_act"),) + _ENCODER),
    "llama": _LLAMA,
    "mistral": _LLAMA,
    "t5": Sayable(
        blocks=(("num_layers", r"^encoder\.block\.(\d+)\.", None),
                ("num_decoder_layers", r"^decoder\.block\.(\d+)\.", "num_layers")),
        vocab=("vocab_size", "shared"), head_in_file=("lm_head", "shared"),
        hints=((r"DenseReluDense\.(wi|act)$", "", "feed_forward_proj"),
               (r"DenseReluDense\.wi$", "activation", "feed_forward_proj"),
               (r"dropout$", "p", "dropout_rate"), (r"Attention$", "dropout", "dropout_rate"),
               (r"(layer_norm|final_layer_norm)$", "eps", "layer_norm_epsilon"))),
}


# -- the call ---------------------------------------------------------------------

def write_pretrained(net: Any, path: str | os.PathLike, dtype: torch.dtype | None,
                     families: Callable[[str], Any], key: str) -> None:
    """`attnlab.pretrained.save_pretrained`: `families(model_type)` is the module of a family,
    `key` the entry of ``net.metadata`` that `from_pretrained` filled."""
    meta = getattr(net, "metadata", {}).get(key)
    if not isinstance(meta, dict) or not {"config", "architecture", "tensors"} <= set(meta):
        raise ArgumentError("save_pretrained: this network did not come from al.from_pretrained, "
                            "so there is no Hugging Face layout to write it in. Use "
                            "net.save(path) for attnlab's own file.")
    if dtype is not None and (not isinstance(dtype, torch.dtype) or not dtype.is_floating_point):
        raise ArgumentError(f"save_pretrained dtype: expected a floating torch dtype such as "
                            f"torch.float32, received {dtype!r}.")
    folder = target(path)
    if dtype is None:                     # the network's own, where its learnables agree
        dtype = _learnables_dtype(net)
    layout = Layout.of(net, meta, families)
    tensors = layout.tensors(net, dtype)
    text = json.dumps(layout.config(dtype), indent=2, sort_keys=True) + "\n"
    write(folder, text, tensors)


def _learnables_dtype(net: Any) -> torch.dtype | None:
    """The one floating dtype of the network's learnables (None when they differ: each
    tensor is then written in the file's dtype)."""
    kinds = {p.dtype for p in net.parameters() if p.is_floating_point()}
    return kinds.pop() if len(kinds) == 1 else None


# -- the layout a network is written in --------------------------------------------------------

class Layout:
    """The config.json, model class and tensor table a network is written with, once the
    network is known to be the model they describe."""

    def __init__(self, data: dict, architecture: str, family_name: str, record: dict,
                 module: Any):
        self.data, self.architecture, self.family_name = data, architecture, family_name
        self.family = module
        self.record = record
        self._net_head_untied = False

    @classmethod
    def of(cls, net: Any, meta: dict, families: Callable[[str], Any]) -> Layout:
        data = dict(meta["config"])
        name = str(Config(data, "the saved config").model_type)
        family = families(name)
        if not hasattr(family, "network") or not hasattr(family, "weights"):
            raise CheckpointError(f"save_pretrained: the {name} family was registered as a "
                                  "loading function, which says no layout to write back. "
                                  "Register a description (al.pretrained.Decoder) to save in "
                                  "this layout, or keep the network with net.save(path).")
        layout = cls(data, meta["architecture"], name, meta["tensors"], family)
        layout.check(net)
        return layout

    @property
    def sayable(self) -> Sayable:
        """What the family's config.json can say: its description's, else the table's (a
        callable of the model class gives the one for this network's)."""
        say = getattr(self.family, "sayable", None) or SAYABLE.get(self.family_name, Sayable())
        return say(self.architecture) if callable(say) else say      # one per model class

    @property
    def cfg(self) -> Config:
        return Config(dict(self.data), "the config.json save_pretrained writes")

    def reference(self) -> Any:
        """The network this config.json describes (its layers only: nothing is allocated)."""
        try:
            ref = self.family.network(self.cfg, self.architecture)
        except AttnlabError as e:
            raise CheckpointError(f"save_pretrained: the network needs a {self.family_name} "
                                  f"config.json that cannot be written: {e} Nothing was written. "
                                  "Use net.save(path) for attnlab's own file.") from None
        say = self.sayable
        if say.head_in_file is not None:
            _own_head_in_file(ref, self._net_head_untied, say.head_in_file)
        return ref

    def check(self, net: Any) -> None:
        """Updates the config with what it can say about `net`, then refuses any difference
        left between `net` and the network the config describes."""
        say = self.sayable
        self._net_head_untied = say.head_in_file is not None and \
            _untied(net, *say.head_in_file)
        _derive(self.data, net, say)
        ref = self.reference()
        if say.head is not None and _tie_differs(net, ref, *say.head):
            self.data["tie_word_embeddings"] = not _untied(net, *say.head)
            ref = self.reference()
        problems = Comparison(net, ref, self.family_name, self.data, say).differences()
        if problems:
            shown = problems[:MAX_DIFFERENCES]
            more = len(problems) - len(shown)
            raise CheckpointError(
                f"save_pretrained: the network is not a model that a {self.family_name} "
                "config.json can describe, so transformers would load a different model from "
                "the folder:\n  - " + "\n  - ".join(shown)
                + (f"\n  - (and {more} more)" if more else "")
                + "\nNothing was written. Undo these edits to save in this layout, or keep the "
                  "network in attnlab's own file with net.save(path).")

    def config(self, dtype: torch.dtype | None) -> dict:
        config = dict(self.data)
        if dtype is not None:
            key = "torch_dtype" if "torch_dtype" in config and "dtype" not in config else "dtype"
            config[key] = str(dtype).removeprefix("torch.")
        return config

    def tensors(self, net: Any, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
        cfg = self.cfg
        table = self.family.weights(cfg, self.architecture)
        params = dict(net.learnables)
        table, record = _table_and_record(table, self.record, params)
        check_table(net, table, self.family_name)
        return collect(net, table, record, self.family_name, dtype)


def _own_head_in_file(ref: Any, net_untied: bool, pair: tuple[str, str]) -> None:
    """T5: an untied head is said by the file itself (its own `lm_head.weight`, which both
    transformers and attnlab keep apart from the embedding's)."""
    head = ref.layer_map.get(pair[0])
    if net_untied and head is not None and getattr(head, "tied_to", None) == pair[1]:
        head.tied_to = None


def _untied(net: Any, head: str, embedding: str) -> bool:
    layer = net.layer_map.get(head)
    return layer is not None and getattr(layer, "tied_to", None) != embedding


def _tie_differs(net: Any, ref: Any, head: str, embedding: str) -> bool:
    if head not in net.layer_map or head not in ref.layer_map:
        return False
    return _untied(net, head, embedding) != _untied(ref, head, embedding)


def _derive(data: dict, net: Any, say: Sayable) -> None:
    """Writes into `data` what the config can say about `net`: its block counts, vocabulary
    and number of labels."""
    layers = net.layer_map
    for key, pattern, default in say.blocks:
        rx = re.compile(pattern)
        found = [int(m.group(1)) for n in layers if (m := rx.match(n))]
        n = max(found) + 1 if found else 0
        if data.get(key, data.get(default) if default else None) != n:
            data[key] = n
    if say.vocab is not None:
        key, name = say.vocab
        vocab = getattr(layers.get(name), "vocab", None)
        if isinstance(vocab, int) and data.get(key) != vocab:
            data[key] = vocab
    if say.labels is not None and say.labels in layers:
        _labels(data, getattr(layers[say.labels], "out", None), net.metadata.get("class_labels"))


def _labels(data: dict, n: Any, names: Any) -> None:
    """`id2label`/`label2id` (and `num_labels` where the config has it) for a head of `n`
    classes: the names training left (`class_labels`), else the config's, else LABEL_i."""
    if not isinstance(n, int):
        return
    current = Config(dict(data), "the saved config").num_labels()
    named = isinstance(names, list) and len(names) == n and names != list(range(n)) and \
        len({str(x) for x in names}) == n
    if n == current and not named:
        return
    labels = [str(x) for x in names] if named else [f"LABEL_{i}" for i in range(n)]
    data["id2label"] = {str(i): label for i, label in enumerate(labels)}
    data["label2id"] = {label: i for i, label in enumerate(labels)}
    if "num_labels" in data:
        data["num_labels"] = n


def _table_and_record(table: list[Weight], record: dict, params: dict) -> tuple[list[Weight], dict]:
    """The rows to write and each one's file layout [dtype, shape(, file name)]: the original
    file's where it had the tensor, else the network's shape in the file's dtype. A row the
    original left out because it was tied is written when the network's learnable is its own
    (an untied head)."""
    covered = {id(params[n]) for w in table if not w.tied for n in w.learnables if n in params}
    rows, out = [], {}
    for w in table:
        if w.tied:
            if all(n in params and id(params[n]) not in covered for n in w.learnables):
                w = dataclasses.replace(w, tied=False)     # its own weight now: written
                covered.update(id(params[n]) for n in w.learnables)
            elif w.name not in record:
                continue                               # the tensor it is tied to says it
        rows.append(w)
    kinds = Counter(r[0] for r in record.values())
    kind = kinds.most_common(1)[0][0] if kinds else "float32"
    fresh = any(w.name not in record for w in rows if not w.zero)
    for w in rows:
        if w.zero:
            continue                                   # no tensor: collect checks it is zero
        parts = [params[n] for n in w.learnables if n in params]
        shape = _file_shape(w, parts)
        old = record.get(w.name)
        if old is not None and math.prod(old[1]) == math.prod(shape):
            shape = list(old[1])                       # e.g. ViT's 1×1×D class token
        out[w.name] = [old[0] if old else kind, list(shape)] + \
            ([old[2]] if old and len(old) > 2 and not fresh else [])
    return rows, out


def _file_shape(w: Weight, parts: list) -> list[int]:
    if not parts:
        return []
    shapes = [tuple(p.shape) for p in parts]
    shape = (sum(s[0] for s in shapes),) + shapes[0][1:] if len(shapes) > 1 else shapes[0]
    return list(shape[::-1] if w.transpose else shape)


# -- comparing a network with its family's layout ----------------------------------------------

_ABSENT = object()


class Comparison:
    """The differences between a network and the one its config describes, in words."""

    def __init__(self, net: Any, ref: Any, family_name: str, data: dict, say: Sayable):
        self.net, self.ref, self.family_name, self.data = net, ref, family_name, data
        self.say = say
        self.hints = [(re.compile(p), option, key) for p, option, key in say.hints]
        self.mine, self.theirs = net.layer_map, ref.layer_map
        self.extra = [n for n in self.mine if n not in self.theirs]
        self.missing = [n for n in self.theirs if n not in self.mine]

    def differences(self) -> list[str]:
        out = []
        for name, theirs in self.theirs.items():
            if name in self.mine:
                out += self._layer(name, self.mine[name], theirs)
        pairs = self._pairs()
        for x in self.extra:
            m = pairs.get(x)
            out.append(self._extra(x) if m is None else
                       f"a layer '{x}' ({_describe(self.mine[x])}) stands where "
                       f"{self.family_name}'s layout has '{m}' ({_describe(self.theirs[m])})"
                       f"{self._hint(m, '')}")
        blocks, named = self._missing_blocks()
        out += blocks
        out += [f"no layer '{n}' ({self.theirs[n].type_name}), which {self.family_name}'s "
                "layout has" for n in self.missing if n not in pairs.values() and n not in named]
        out += self._connections()
        if not out and self.net.output_names != self.ref.output_names:
            out.append(f"the network's outputs are {', '.join(self.net.output_names)}; "
                       f"{self.family_name}'s layout has {', '.join(self.ref.output_names)}")
        return out

    def _layer(self, name: str, mine: Any, theirs: Any) -> list[str]:
        if mine.type_name != theirs.type_name:
            return [f"{name} is {_describe(mine)}; {self.family_name}'s layout has "
                    f"{_describe(theirs)}{self._hint(name, '')}"]
        a, b = mine.config(), theirs.config()
        out = []
        for option in dict.fromkeys([*b, *a]):
            va, vb = a.get(option, _ABSENT), b.get(option, _ABSENT)
            if _same(va, vb):
                continue
            if option == "tied_to":
                out.append(self._tie(name, _value(va), _value(vb)))
            else:
                out.append(f"{name} has {option} {_show(_value(va))}; {self.family_name}'s "
                           f"layout has {_show(_value(vb))}{self._hint(name, option)}")
        return out

    def _tie(self, name: str, mine: Any, theirs: Any) -> str:
        layout = f"{self.family_name}'s layout"
        if theirs is None:
            return f"{name} is tied to {mine}; {layout} gives it its own weight"
        if mine is None:
            return f"{name} is not tied to {theirs}; {layout} ties it to {theirs}"
        return f"{name} is tied to {mine}; {layout} ties it to {theirs}"

    def _hint(self, name: str, option: str) -> str:
        """The config key that sets this option of this layer (or, failing one, its kind)."""
        for wanted in dict.fromkeys((option, "")):
            for rx, opt, key in self.hints:
                if opt == wanted and rx.search(name):
                    if key in self.data:
                        return f" ({key} {_show(self.data[key])})"
                    return f" ({key} not set: its default)"
        return ""

    def _missing_blocks(self) -> tuple[list[str], set[str]]:
        """Whole blocks missing (not the last ones, which the config drops): one line each."""
        lines, named = [], set()
        for key, pattern, _ in self.say.blocks:
            rx = re.compile(pattern)
            blocks: dict[str, list[str]] = {}
            for n in self.theirs:
                if (m := rx.match(n)) is not None:
                    blocks.setdefault(m.group(0).rstrip("."), []).append(n)
            for block, names in blocks.items():
                if all(n in self.missing for n in names):
                    lines.append(f"no block {block} ({len(names)} layers), which "
                                 f"{self.family_name}'s layout has: config.json counts blocks "
                                 f"({key}), so only the last ones can be removed")
                    named.update(names)
        return lines, named

    def _pairs(self) -> dict[str, str]:
        """Extra layers standing where a missing one stood (the same neighbours): a layer
        replaced under another name."""
        pairs: dict[str, str] = {}
        for x in self.extra:
            for m in self.missing:
                if m not in pairs.values() and _neighbours(self.net, x) == _neighbours(self.ref, m):
                    pairs[x] = m
                    break
        return pairs

    def _extra(self, name: str) -> str:
        layer = self.mine[name]
        ins = [src for (dst, _), (src, _) in self.net.sources.items() if dst == name]
        outs = list(dict.fromkeys(dst for (dst, _), (src, _) in self.net.sources.items()
                                  if src == name))
        where = f"between {', '.join(ins)} and {', '.join(outs)}" if ins and outs else \
            f"after {', '.join(ins)}" if ins else f"before {', '.join(outs)}" if outs else \
            "connected to nothing"
        return f"a layer '{name}' ({layer.type_name}) {where} that {self.family_name}'s layout " \
               "does not have"

    def _connections(self) -> list[str]:
        out = []
        seen = set()
        for (dst, port), src in self.ref.sources.items():
            seen.add((dst, port))
            if dst not in self.mine or src[0] not in self.mine:
                continue                               # a missing layer, named already
            got = self.net.source(dst, port)
            if got == src or (got is not None and got[0] in self.extra):
                continue                               # an extra layer, named already
            where = self.ref.port_name(dst, port)
            want = self.ref.port_name(src[0], src[1], "output")
            has = "is not connected" if got is None else \
                f"takes {self.net.port_name(got[0], got[1], 'output')}"
            out.append(f"{where} {has}; {self.family_name}'s layout feeds it from {want}")
        for (dst, port), src in self.net.sources.items():
            if (dst, port) in seen or dst not in self.theirs or src[0] not in self.theirs:
                continue
            out.append(f"{self.net.port_name(dst, port)} takes "
                       f"{self.net.port_name(src[0], src[1], 'output')}; "
                       f"{self.family_name}'s layout leaves it unconnected")
        return out


def _neighbours(graph: Any, name: str) -> tuple[list, list]:
    """The layers feeding `name` (by port, in order) and those it feeds."""
    ins = [src for (dst, _), (src, _) in graph.sources.items() if dst == name]
    outs = sorted({dst for (dst, _), (src, _) in graph.sources.items() if src == name})
    return ins, outs


def _value(v: Any) -> Any:
    return None if v is _ABSENT else v


def _same(a: Any, b: Any) -> bool:
    a, b = _value(a), _value(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    try:
        return bool(a == b)                            # 1 and 1.0 alike
    except Exception:                                  # e.g. tensors: compared by identity
        return a is b


def _show(v: Any) -> str:
    if isinstance(v, str):
        return json.dumps(v)
    return repr(v)


def _describe(layer: Any) -> str:
    """A layer's kind and the options it sets away from their defaults: `GELU(approximate=
    "tanh")`, `ReLU`."""
    params = inspect.signature(type(layer).__init__).parameters
    shown = []
    for option, value in layer.config().items():
        p = params.get(option)
        if p is not None and p.default is not inspect.Parameter.empty and _same(value, p.default):
            continue
        shown.append(f"{option}={_show(value)}")
    return f"{layer.type_name}({', '.join(shown)})" if shown else layer.type_name
