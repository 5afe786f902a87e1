"""LoRA adapters on a network's linear maps: `Network.add_lora` and `Network.merge_lora`.

A target is a layer-name pattern (fnmatch) with an optional projection after '/':
"h.*.attn/query" adapts the query projection of each attention layer 'h.<i>.attn',
"layers.*.mlp.gate_up_proj/gate" the gate of each GLU, "h.*.mlp.c_fc" each Dense layer of
that name. A layer inside a nested network is named as its learnables are, its network's
name first: "block/attn/query", "block/fc". Targets are resolved against the built network
before anything changes, so a pattern that matches nothing is refused with the names it is
close to, and nothing is half adapted.

An adapted map is a `LoraLinear`: an `nn.Linear` (the same weight and bias Parameters, so
names, state-dict keys, ties and optimizers keep them) with two more learnables, `lora_A`
(rank×in) and `lora_B` (out×rank, zeros), computing W x + b + scaling · B(A(dropout(x))).
It is not a bare `nn.Linear`, so every path that reads bare Linears' weights directly (the
one-matmul q|k|v projection, the decoding step) calls it as a module instead.
"""
from __future__ import annotations

import fnmatch
import importlib
import math
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.core.errors import ArgumentError, NetworkError, close_matches
from attnlab.graph import Graph
from attnlab.graph.names import learnable_name, module_path, parse_learnable

__all__ = ["LoraLinear", "add_lora", "merge_lora", "PROJECTIONS"]

# the linear maps inside a layer's module that a target may name after '/': an attention
# module's four, a GLU's two (Llama's gate_proj and up_proj)
PROJECTIONS = ("query", "key", "value", "output", "gate", "up")

Target = Tuple[str, Optional[str]]      # a layer (nested: 'block/fc') and its projection
Place = Tuple[str, Tuple[str, ...]]     # a Hugging Face module and the learnables it holds

_PRETRAINED = "attnlab.pretrained"        # a front end, reached by name when called (as
_LAYOUT = "attnlab.pretrained.saving"     # Network.save_pretrained does): never imported here

# where a net keeps the Parameters that add_lora froze, so that merge_lora thaws them again
_FROZEN = "_lora_frozen"


class LoraLinear(nn.Linear):
    """An `nn.Linear` with a low-rank update: y = W x + b + scaling · B(A(dropout(x)))."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float, dropout: float):
        nn.Module.__init__(self)                 # no weights of its own: it keeps base's
        self.in_features, self.out_features = base.in_features, base.out_features
        self.weight, self.bias = base.weight, base.bias
        self.rank, self.alpha, self.scaling = rank, alpha, alpha / rank
        w = base.weight
        # half-precision bases get float32 adapters (as peft): updates that small round away
        dtype = torch.float32 if w.dtype in (torch.float16, torch.bfloat16) else w.dtype
        self.lora_A = nn.Parameter(torch.empty(rank, self.in_features, dtype=dtype,
                                               device=w.device))
        self.lora_B = nn.Parameter(torch.zeros(self.out_features, rank, dtype=dtype,
                                               device=w.device))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))      # peft's init of A
        self.lora_dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.train(base.training)

    def forward(self, x: Tensor) -> Tensor:
        y = F.linear(x, self.weight, self.bias)
        a = self.lora_A
        # under autocast F.linear casts by itself; outside it x meets A in A's dtype
        h = self.lora_dropout(x if torch.is_autocast_enabled() else x.to(a.dtype))
        update = F.linear(F.linear(h, a), self.lora_B) * self.scaling
        return y + update.to(y.dtype)

    def delta(self) -> Tensor:
        """scaling · B·A, the update folded into the weight by a merge (float32 or wider)."""
        b, a = self.lora_B.detach(), self.lora_A.detach()
        wide = torch.promote_types(a.dtype, torch.float32)
        return (b.to(wide) @ a.to(wide)) * self.scaling

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, rank={self.rank}, alpha={self.alpha}")


# -- where the linear maps are ----------------------------------------------------------------
class Site(NamedTuple):
    """A layer with a module, in a network or in a network nested in it (at any depth)."""
    name: str          # its name, nested networks' layer names joined by '/' ("block/attn")
    owner: Any         # the network whose layer it is
    local: str         # its name in `owner`
    layer: Any         # the layer (its description)
    module: nn.Module


def sites(net: Any, prefix: str = "") -> List[Site]:
    """Every layer that has a module, in network order, a nested network's layers in its
    place (after the nested network itself)."""
    out: List[Site] = []
    mods = net.layer_modules
    for local in net._layers:
        if local not in mods:
            continue
        name = learnable_name(prefix, local) if prefix else local
        out.append(Site(name, net, local, net._layers[local], mods[local]))
        if isinstance(mods[local], Graph):
            out += sites(mods[local], name)
    return out


def _is_linear(m: Any) -> bool:
    # a bare Linear (or one adapted already, refused later by name); a subclass computes
    # something else around its matmul (a Dense on images flattens first): not ours to wrap
    return type(m) is nn.Linear or isinstance(m, LoraLinear)


def _projections(module: nn.Module) -> List[str]:
    """The PROJECTIONS that `module` holds as linear maps (an attention module's, a GLU's)."""
    return [p for p in PROJECTIONS if _is_linear(module._modules.get(p))]


def maps(net: Any) -> List[Tuple[Site, Optional[str]]]:
    """(site, projection or None) for every linear map a target may name, in network order:
    a layer whose module is a Linear (Dense), and each projection of one that has them."""
    out: List[Tuple[Site, Optional[str]]] = []
    for s in sites(net):
        if _is_linear(s.module):
            out.append((s, None))
        out += [(s, p) for p in _projections(s.module)]
    return out


def map_module(site: Site, proj: Optional[str]) -> Optional[nn.Module]:
    """The linear map that (site, projection or None) of `maps` names."""
    return site.module if proj is None else site.module._modules[proj]


def torch_name(target: Target) -> str:
    """The name `named_modules()` gives a (layer, projection): 'layer_modules.h.0.attn.query',
    a nested network's layer under its network's ('layer_modules.block.layer_modules.fc')."""
    name, proj = target
    path: Tuple[str, ...] = ()
    for part in name.split("/"):
        path += ("layer_modules",) + module_path(part)
    return ".".join(path + ((proj,) if proj else ()))


def shown(target: Target) -> str:
    return target[0] + (f"/{target[1]}" if target[1] else "")


def _file_weights(net: Any) -> List[Any]:
    """The weight table (`attnlab.pretrained.weights.Weight`s) of a from_pretrained network's
    family; [] for any other network."""
    pre = importlib.import_module(_PRETRAINED)
    meta = net.metadata.get(pre.META_KEY)
    if not isinstance(meta, dict) or "config" not in meta:
        return []
    layout = importlib.import_module(_LAYOUT).Layout.of(net, meta, pre.family)
    return [w for w in layout.family.weights(layout.cfg, layout.architecture)
            if w.name.endswith(".weight") and not w.reshape and not w.interleave]


def pretrained_table(net: Any) -> Optional[Dict[str, Place]]:
    """learnable weight name → (its Hugging Face module, the learnables that module's weight
    holds: several where one tensor is split, as GPT-2's c_attn into q, k, v, Phi-3's
    gate_up_proj into gate and up), for a from_pretrained network; None for any other."""
    weights = _file_weights(net)
    if not weights:
        return None
    return {name: (w.name[:-len(".weight")], tuple(w.learnables))
            for w in weights for name in w.learnables}


def transposed_modules(net: Any) -> List[str]:
    """The Hugging Face modules whose file holds the weight in×out (GPT-2's Conv1D, which
    peft adapts with fan_in_fan_out)."""
    return [w.name[:-len(".weight")] for w in _file_weights(net) if w.transpose]


# -- resolving targets --------------------------------------------------------------------
def _check_numbers(rank: Any, alpha: Any, dropout: Any) -> None:
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ArgumentError(f"add_lora: rank must be a positive int, received {rank!r}. "
                            "Use e.g. rank=8.")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or \
            not math.isfinite(alpha) or alpha <= 0:
        raise ArgumentError(f"add_lora: alpha must be a positive finite number, received "
                            f"{alpha!r}. Use e.g. alpha=16 (scaling is alpha/rank).")
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or \
            not 0 <= dropout < 1:
        raise ArgumentError(f"add_lora: dropout must be a number in [0, 1), received "
                            f"{dropout!r}.")


def _patterns(targets: Any) -> List[str]:
    if isinstance(targets, str):
        targets = [targets]
    if not isinstance(targets, (list, tuple)) or not targets or \
            not all(isinstance(t, str) and t for t in targets):
        raise ArgumentError(f"add_lora: targets must be a layer-name pattern or a list of "
                            f"them, received {targets!r}. Use e.g. ['h.*.attn/query', "
                            "'h.*.attn/value'].")
    return list(targets)


def _hit(pattern: str, site: Site, proj: Optional[str]) -> bool:
    """Whether `pattern` names this map: a Linear layer by its whole name ('h.*.mlp.c_fc',
    'block/fc'), a projection as 'layer-pattern/projection-pattern' ('h.*.attn/query')."""
    if proj is None:
        return fnmatch.fnmatchcase(site.name, pattern)
    layer_pat, slash, proj_pat = pattern.rpartition("/")
    return bool(slash) and fnmatch.fnmatchcase(proj, proj_pat) and \
        fnmatch.fnmatchcase(site.name, layer_pat)


def _refuse_unmatched(net: Any, pattern: str, all_sites: List[Site]) -> None:
    """The ArgumentError for a pattern that names no linear map, saying why."""
    layer_pat, slash, proj_pat = pattern.rpartition("/")
    names_proj = bool(slash) and any(fnmatch.fnmatchcase(p, proj_pat) for p in PROJECTIONS)
    matched = [s for s in all_sites if fnmatch.fnmatchcase(s.name, pattern) or
               (names_proj and fnmatch.fnmatchcase(s.name, layer_pat))]
    if matched:
        kinds = ", ".join(f"'{s.name}' ({type(s.layer).__name__})" for s in matched[:5])
        what = f"a '{proj_pat}' projection" if names_proj else \
            "a plain linear map of its own (a Dense layer on B×C or B×T×C inputs; name an " \
            "attention layer's projection after '/', e.g. 'attn/query')"
        raise ArgumentError(f"add_lora: target '{pattern}' matches {kinds}"
                            f"{' …' if len(matched) > 5 else ''}, none of which has {what}.")
    if slash and not names_proj and any(fnmatch.fnmatchcase(s.name, layer_pat) and
                                        _projections(s.module) for s in all_sites):
        raise ArgumentError(f"add_lora: target '{pattern}' names the projection "
                            f"'{proj_pat}'; an attention layer's are query, key, value, "
                            f"output, a GLU's gate, up.{close_matches(proj_pat, PROJECTIONS)}")
    names = [s.name for s in all_sites]
    near = close_matches(layer_pat if names_proj else pattern, names)
    raise ArgumentError(f"add_lora: target '{pattern}' matches no layer of the network."
                        f"{near}{_hugging_face_hint(net, pattern)} Targets are layer names "
                        "(fnmatch patterns; a nested network's layers as 'block/fc'), e.g. "
                        "'h.*.attn/query' or a Dense layer's name.")


def _hugging_face_hint(net: Any, pattern: str) -> str:
    """For a from_pretrained network, where a pattern names Hugging Face modules (as peft's
    target_modules do: 'layers.*.mlp.gate_proj'), the attnlab target of the first."""
    try:
        table = pretrained_table(net)
    except NetworkError:        # edited past what its checkpoint's layout says: no names to
        return ""               # offer, and the error about the target stands as it is
    for learnable, (module, _) in (table or {}).items():
        if fnmatch.fnmatchcase(module, pattern) or fnmatch.fnmatchcase(module, "*." + pattern):
            layer, param = parse_learnable(learnable)
            proj = param[:-len(".weight")]
            target = shown((layer, proj if proj in PROJECTIONS else None))
            return (f" Hugging Face's module '{module}' is the target '{target}' here (attnlab "
                    "names the layers it builds; net.learnables lists them).")
    return ""


def _resolve_one(net: Any, pattern: str, all_maps: List[Tuple[Site, Optional[str]]],
                 all_sites: List[Site]) -> List[Target]:
    found = [(s.name, p) for s, p in all_maps if _hit(pattern, s, p)]
    if not found:
        _refuse_unmatched(net, pattern, all_sites)
    return found


def resolve(net: Any, targets: Any) -> List[Target]:
    """(layer, projection or None) for every linear map the targets name, in network order,
    each once; raises before anything changes."""
    all_maps, all_sites = maps(net), sites(net)
    found: List[Target] = []
    for pattern in _patterns(targets):
        found += [t for t in _resolve_one(net, pattern, all_maps, all_sites) if t not in found]
    refuse_adapted(net, found, "add_lora")
    order = {(s.name, p): i for i, (s, p) in enumerate(all_maps)}
    return sorted(found, key=order.__getitem__)


def refuse_adapted(net: Any, found: List[Target], doing: str) -> None:
    """An ArgumentError where one of `found` already has an adapter."""
    for target in found:
        if isinstance(linear_at(net, *target), LoraLinear):
            raise ArgumentError(f"{doing}: '{shown(target)}' already has a LoRA adapter. Call "
                                "merge_lora() first to fold it in, then add new ones.")


def _owner(net: Any, name: str) -> Tuple[Any, str]:
    """The network holding layer `name` (nested names: 'block/fc') and its name there."""
    *outer, local = name.split("/")
    for part in outer:
        net = net.layer_modules[part]
    return net, local


def linear_at(net: Any, name: str, proj: Optional[str]) -> nn.Linear:
    owner, local = _owner(net, name)
    module = owner.layer_modules[local]
    return module if proj is None else module._modules[proj]  # an nn.Linear (resolve)


def _put(net: Any, name: str, proj: Optional[str], linear: nn.Module) -> None:
    owner, local = _owner(net, name)
    if proj is None:
        owner.layer_modules[local] = linear     # the plan is made again at the next call
    else:
        setattr(owner.layer_modules[local], proj, linear)


def _built(net: Any) -> None:
    if not net.initialized:
        try:
            net.initialize()
        except NetworkError as e:
            raise NetworkError(f"add_lora: the network must be initialised first: {e}") from None


# -- the public operations ------------------------------------------------------------------
def add_lora(net: Any, targets: Any, rank: int = 8, alpha: float = 16,
             dropout: float = 0.0) -> List[Target]:
    """Adapts the targets' linear maps with LoRA and freezes every other learnable. Returns
    the (layer, projection or None) adapted."""
    _check_numbers(rank, alpha, dropout)
    _built(net)
    found = resolve(net, targets)
    adapt(net, found, rank, alpha, dropout)
    return found


def adapt(net: Any, found: List[Target], rank: int, alpha: float,
          dropout: float) -> None:
    """Puts an adapter on each (layer, projection) of `found` (resolved: linear maps without
    one) and freezes everything else."""
    froze = net.__dict__.setdefault(_FROZEN, [])
    held = {id(p) for _, _, m in adapters(net) for p in (m.lora_A, m.lora_B)}
    for p in net.parameters():                  # everything but the adapters stops learning
        if p.requires_grad and id(p) not in held:
            p.requires_grad_(False)
            froze.append(p)
    for name, proj in found:
        _put(net, name, proj, LoraLinear(linear_at(net, name, proj), rank, alpha,
                                         float(dropout)))


def adapters(net: Any) -> List[Tuple[str, Optional[str], LoraLinear]]:
    """(layer, projection or None, its LoraLinear) for every adapter, in network order
    (a nested network's layers named 'block/fc')."""
    out: List[Tuple[str, Optional[str], LoraLinear]] = []
    for s, p in maps(net):
        m = map_module(s, p)
        if isinstance(m, LoraLinear):
            out.append((s.name, p, m))
    return out


def refuse_adapters(net: Any, doing: str) -> None:
    """A NetworkError where the network holds adapters: a saved network's layers have no
    place for them (the file would not load), so they are merged first, never dropped."""
    found = adapters(net)
    if found:
        names = ", ".join(shown((n, p)) for n, p, _ in found[:4])
        more = f" and {len(found) - 4} more" if len(found) > 4 else ""
        raise NetworkError(f"{doing}: the network has LoRA adapters ({names}{more}), which "
                           "its saved layers have no place for. Call net.merge_lora() first "
                           "to fold them into the weights.")


def _refuse_tied(net: Any, found: List[Tuple[str, Optional[str], LoraLinear]]) -> None:
    """A NetworkError, before any change, where an adapted weight is shared with another
    learnable (an output projection tied to the embedding): folding the update into it would
    change the other too."""
    uses: dict = {}
    for _, p in net.named_parameters(remove_duplicate=False):
        uses[id(p)] = uses.get(id(p), 0) + 1
    tied = [shown((n, p)) for n, p, m in found if uses.get(id(m.weight), 0) > 1]
    if tied:
        raise NetworkError(f"merge_lora: the weight of {', '.join(tied)} is tied to another "
                           "learnable (e.g. the embedding), which a merge would change as well. "
                           "Keep the adapter unmerged (net.save_adapter), or adapt layers whose "
                           "weights are their own.")


def _plain(lora: LoraLinear) -> nn.Linear:
    """A bare nn.Linear holding the adapter's weight and bias Parameters."""
    lin = nn.Linear(lora.in_features, lora.out_features, bias=lora.bias is not None,
                    device="meta")
    lin.weight, lin.bias = lora.weight, lora.bias
    lin.train(lora.training)
    return lin


def merge_lora(net: Any) -> List[Target]:
    """Folds every adapter into its weight (W + scaling·B·A), removes the adapters and thaws
    what add_lora froze. Returns the (layer, projection or None) merged."""
    found = adapters(net)
    if not found:
        raise NetworkError("merge_lora: the network has no LoRA adapters. Add them with "
                           "net.add_lora(targets) first.")
    _refuse_tied(net, found)
    touched = set()
    for name, proj, lora in found:
        with torch.no_grad():
            w, delta = lora.weight, lora.delta()
            w.copy_((w.to(delta.dtype) + delta).to(w.dtype))
        _put(net, name, proj, _plain(lora))
        touched.add(name)
    for name in touched:                        # q|k|v back in one storage for one matmul
        owner, local = _owner(net, name)
        pack = getattr(owner.layer_modules[local], "pack_qkv", None)
        if pack is not None:
            pack()
    _thaw(net.__dict__.pop(_FROZEN, []))
    return [(n, p) for n, p, _ in found]


def _thaw(params: List[nn.Parameter]) -> None:
    for p in params:
        p.requires_grad_(True)
