"""LoRA adapters on a network's linear maps: `Network.add_lora` and `Network.merge_lora`.

A target is a layer-name pattern (fnmatch) with an optional projection after '/':
"h.*.attn/query" adapts the query projection of each attention layer 'h.<i>.attn',
"h.*.mlp.c_fc" each Dense layer of that name. Targets are resolved against the built
network before anything changes, so a pattern that matches nothing is refused with the
names it is close to, and nothing is half adapted.

An adapted map is a `LoraLinear`: an `nn.Linear` (the same weight and bias Parameters, so
names, state-dict keys, ties and optimizers keep them) with two more learnables, `lora_A`
(rank×in) and `lora_B` (out×rank, zeros), computing W x + b + scaling · B(A(dropout(x))).
It is not a bare `nn.Linear`, so every path that reads bare Linears' weights directly (the
one-matmul q|k|v projection, the decoding step) calls it as a module instead.
"""
from __future__ import annotations

import fnmatch
import math
from typing import Any, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.core.errors import ArgumentError, NetworkError, close_matches

__all__ = ["LoraLinear", "add_lora", "merge_lora", "PROJECTIONS"]

# the linear maps of an attention module that a target may name after '/'
PROJECTIONS = ("query", "key", "value", "output")

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


def _adaptable(module: nn.Module, projection: Optional[str]) -> Optional[nn.Module]:
    """The linear map a target names in `module`, or None where it has none."""
    found = module if projection is None else module._modules.get(projection)
    # a bare Linear (or one adapted already, refused later by name); a subclass computes
    # something else around its matmul (a Dense on images flattens first): not ours to wrap
    return found if type(found) is nn.Linear or isinstance(found, LoraLinear) else None


def _resolve_one(net: Any, pattern: str) -> List[Tuple[str, Optional[str]]]:
    layer_pat, _, projection = pattern.partition("/")
    projection_or_none = projection or None
    if projection and projection not in PROJECTIONS:
        raise ArgumentError(f"add_lora: target '{pattern}' names the projection "
                            f"'{projection}'; an attention layer's are {', '.join(PROJECTIONS)}."
                            f"{close_matches(projection, PROJECTIONS)}")
    mods = net.layer_modules
    names = [n for n in net._layers if n in mods]
    matched = [n for n in names if fnmatch.fnmatchcase(n, layer_pat)]
    if not matched:
        raise ArgumentError(f"add_lora: target '{pattern}' matches no layer of the network."
                            f"{close_matches(layer_pat, names)} Targets are layer names "
                            "(fnmatch patterns), e.g. 'h.*.attn/query' or a Dense layer's name.")
    found = [(n, projection_or_none) for n in matched
             if _adaptable(mods[n], projection_or_none) is not None]
    if not found:
        kinds = ", ".join(f"'{n}' ({type(net._layers[n]).__name__})" for n in matched[:5])
        what = f"a '{projection}' projection" if projection else \
            "a plain linear map of its own (a Dense layer on B×C or B×T×C inputs; name an " \
            "attention layer's projection after '/', e.g. 'attn/query')"
        raise ArgumentError(f"add_lora: target '{pattern}' matches {kinds}"
                            f"{' …' if len(matched) > 5 else ''}, none of which has {what}.")
    return found


def resolve(net: Any, targets: Any) -> List[Tuple[str, Optional[str]]]:
    """(layer, projection or None) for every linear map the targets name, in network order,
    each once; raises before anything changes."""
    found: List[Tuple[str, Optional[str]]] = []
    for pattern in _patterns(targets):
        found += [t for t in _resolve_one(net, pattern) if t not in found]
    refuse_adapted(net, found, "add_lora")
    order = {n: i for i, n in enumerate(net._layers)}
    return sorted(found, key=lambda t: (order[t[0]], PROJECTIONS.index(t[1]) if t[1] else -1))


def refuse_adapted(net: Any, found: List[Tuple[str, Optional[str]]], doing: str) -> None:
    """An ArgumentError where one of `found` already has an adapter."""
    for name, proj in found:
        if isinstance(_linear_at(net, name, proj), LoraLinear):
            where = name + (f"/{proj}" if proj else "")
            raise ArgumentError(f"{doing}: '{where}' already has a LoRA adapter. Call "
                                "merge_lora() first to fold it in, then add new ones.")


def _linear_at(net: Any, name: str, proj: Optional[str]) -> nn.Linear:
    module = net.layer_modules[name]
    return module if proj is None else module._modules[proj]  # an nn.Linear (resolve)


def _put(net: Any, name: str, proj: Optional[str], linear: nn.Module) -> None:
    if proj is None:
        net.layer_modules[name] = linear        # the plan is made again at the next call
    else:
        setattr(net.layer_modules[name], proj, linear)


def _built(net: Any) -> None:
    if not net.initialized:
        try:
            net.initialize()
        except NetworkError as e:
            raise NetworkError(f"add_lora: the network must be initialised first: {e}") from None


# -- the public operations ------------------------------------------------------------------
def add_lora(net: Any, targets: Any, rank: int = 8, alpha: float = 16,
             dropout: float = 0.0) -> List[Tuple[str, Optional[str]]]:
    """Adapts the targets' linear maps with LoRA and freezes every other learnable. Returns
    the (layer, projection or None) adapted."""
    _check_numbers(rank, alpha, dropout)
    _built(net)
    found = resolve(net, targets)
    adapt(net, found, rank, alpha, dropout)
    return found


def adapt(net: Any, found: List[Tuple[str, Optional[str]]], rank: int, alpha: float,
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
        _put(net, name, proj, LoraLinear(_linear_at(net, name, proj), rank, alpha,
                                         float(dropout)))


def adapters(net: Any) -> List[Tuple[str, Optional[str], LoraLinear]]:
    """(layer, projection or None, its LoraLinear) for every adapter, in network order."""
    out: List[Tuple[str, Optional[str], LoraLinear]] = []
    mods = net.layer_modules
    for name in net._layers:
        if name not in mods:
            continue
        m = mods[name]
        if isinstance(m, LoraLinear):
            out.append((name, None, m))
        out += [(name, p, m._modules[p]) for p in PROJECTIONS
                if isinstance(m._modules.get(p), LoraLinear)]
    return out


def refuse_adapters(net: Any, doing: str) -> None:
    """A NetworkError where the network holds adapters: a saved network's layers have no
    place for them (the file would not load), so they are merged first, never dropped."""
    found = adapters(net)
    if found:
        names = ", ".join(n + (f"/{p}" if p else "") for n, p, _ in found[:4])
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
    tied = [n + (f"/{p}" if p else "") for n, p, m in found if uses.get(id(m.weight), 0) > 1]
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


def merge_lora(net: Any) -> List[Tuple[str, Optional[str]]]:
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
            w = lora.weight
            w.copy_((w.to(lora.delta().dtype) + lora.delta()).to(w.dtype))
        _put(net, name, proj, _plain(lora))
        touched.add(name)
    for name in touched:                        # q|k|v back in one storage for one matmul
        pack = getattr(net.layer_modules[name], "pack_qkv", None)
        if pack is not None:
            pack()
    _thaw(net.__dict__.pop(_FROZEN, []))
    return [(n, p) for n, p, _ in found]


def _thaw(params: List[nn.Parameter]) -> None:
    for p in params:
        p.requires_grad_(True)
