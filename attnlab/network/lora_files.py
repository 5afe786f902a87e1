"""LoRA adapters in peft's layout: `Network.save_adapter` and `Network.load_adapter`.

A folder holds adapter_config.json (peft_type "LORA", r, lora_alpha, target_modules, …) and
adapter_model.safetensors with "base_model.model.<module>.lora_A.weight" (r×in) and
".lora_B.weight" (out×r). <module> is the Hugging Face module's name for a network from
`al.from_pretrained` (read from its family's weight table), so that peft puts the adapter on
the Hugging Face model; for any other network it is the attnlab module path
("layer_modules.h.0.attn.query"), the name `peft.get_peft_model` sees on the network itself.
Where one Hugging Face weight holds several of attnlab's maps (GPT-2's c_attn: q|k|v), the
adapters of its k adapted parts are written as one of rank k·r (A stacked, B block-diagonal,
alpha k·alpha: the same update), and one read back gives each part the module's A and its
own rows of B. Ranks and alphas may differ by module: the config's r and lora_alpha are
those most modules have, rank_pattern and alpha_pattern give the others (read back by peft's
rule: the first key, a regular expression, matching the module's name or its end).
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Tuple, cast

import torch

from attnlab.core.errors import ArgumentError, DataError, NetworkError
from attnlab.core.reading import read_regular
from attnlab.network import lora

__all__ = ["save_adapter", "load_adapter"]

CONFIG, WEIGHTS, PREFIX = "adapter_config.json", "adapter_model.safetensors", "base_model.model."

Target = lora.Target
Place = lora.Place


def _learnable(target: Target) -> str:
    name, proj = target
    return f"{name}/{proj}.weight" if proj else f"{name}/weight"


def _table(net: Any, doing: str) -> Any:
    """`lora.pretrained_table`, refused in `doing`'s words where the network was edited past
    what its checkpoint's config.json says (the module names are that layout's)."""
    try:
        return lora.pretrained_table(net)
    except NetworkError as e:
        raise NetworkError(f"{doing}: the adapter's module names are those of the network's "
                           "checkpoint, and the network was edited past what its config.json "
                           "says, so they cannot be told. Adapt the network as loaded. (The "
                           f"layout's check: {e})") from None


def module_names(net: Any, targets: List[Target]) -> Dict[Target, Place]:
    """Each adapted (layer, projection) → where peft knows it: (module, its learnables)."""
    table = _table(net, "save_adapter")
    out: Dict[Target, Place] = {}
    for t in targets:
        if table is None:
            out[t] = (lora.torch_name(t), (_learnable(t),))
            continue
        place = table.get(_learnable(t))
        if place is None:
            raise NetworkError(f"save_adapter: '{lora.shown(t)}' has no Hugging Face module, so "
                               "peft's layout cannot say its adapter. Adapt layers that are a "
                               "Hugging Face Linear (e.g. Llama's q_proj, a Dense layer).")
        out[t] = place
    return out


def _module_tensors(net: Any, module: str, parts: Tuple[str, ...], held: Dict[str, Any]
                    ) -> Tuple[torch.Tensor, torch.Tensor, int, float]:
    """lora_A, lora_B, rank and alpha of one Hugging Face module from the adapters on its
    parts: for a split tensor (q|k|v) the adapters' A stacked and their B placed
    block-diagonally in the rows of their parts, rank the sum of theirs: the same update,
    exactly, where they scale alike (one module has one scaling)."""
    loras = [held[p] for p in parts if p in held]
    if len({m.scaling for m in loras}) > 1:
        raise NetworkError(f"save_adapter: the adapters on the parts of '{module}' ("
                           f"{', '.join(p for p in parts if p in held)}) have different "
                           "scalings (alpha/rank), and peft keeps one per module. Give them the "
                           "same rank and alpha.")
    rank = sum(m.rank for m in loras)
    a = torch.cat([m.lora_A.detach() for m in loras])
    if len(parts) == 1:
        return a, loras[0].lora_B.detach(), rank, loras[0].alpha
    rows = [net.learnables[p].shape[0] for p in parts]
    b = a.new_zeros(sum(rows), rank)
    start = col = 0
    for part, n in zip(parts, rows):
        if part in held:
            r = held[part].rank
            b[start:start + n, col:col + r] = held[part].lora_B.detach()
            col += r
        start += n
    return a, b, rank, loras[0].alpha * rank / loras[0].rank    # the same scaling


def _one(values: set, what: str) -> Any:
    if len(values) != 1:
        raise NetworkError(f"save_adapter: the adapters have different {what} "
                           f"({', '.join(map(str, sorted(values)))}); peft's layout keeps one. "
                           "Add them in one add_lora call.")
    return values.pop()


def _most(values: List[Any]) -> Any:
    """The value most modules have (the first of those tied), for the config's own entry."""
    return max(values, key=values.count)


def save_adapter(net: Any, path: str | os.PathLike) -> None:
    """Writes the network's adapters as peft saves them (see the module's description)."""
    found = lora.adapters(net)
    if not found:
        raise NetworkError("save_adapter: the network has no LoRA adapters. Add them with "
                           "net.add_lora(targets) first.")
    places = module_names(net, [(n, p) for n, p, _ in found])
    drops = {m.lora_dropout.p if isinstance(m.lora_dropout, torch.nn.Dropout) else 0.0
             for _, _, m in found}
    held = {_learnable((n, p)): m for n, p, m in found}
    tensors, ranks, alphas = {}, {}, {}
    for module, parts in sorted(set(places.values())):
        a, b, ranks[module], alpha = _module_tensors(net, module, parts, held)
        alphas[module] = _exact(alpha)
        tensors[PREFIX + module + ".lora_A.weight"] = a.cpu().contiguous()
        tensors[PREFIX + module + ".lora_B.weight"] = b.cpu().contiguous()
    # one rank and alpha in the config (those most modules have); the others per module, by
    # exact name (a module of k adapted parts of rank r has rank k·r, alpha k·alpha)
    rank, alpha = _most(list(ranks.values())), _most(list(alphas.values()))
    config = _config(net, rank, alpha, _one(drops, "dropouts"), sorted(ranks))
    # peft's flag for GPT-2's Conv1D (in×out weights); it sets it per module itself, with a
    # warning where the config says otherwise
    config["fan_in_fan_out"] = set(ranks) <= set(lora.transposed_modules(net))
    config["rank_pattern"] = {m: k for m, k in ranks.items() if k != rank}
    config["alpha_pattern"] = {m: k for m, k in alphas.items() if k != alpha}
    _write(Path(path), config, tensors)


def _exact(x: float) -> float:
    """An int where the value is one (as peft writes lora_alpha), else the float."""
    return int(x) if float(x).is_integer() else x


def _config(net: Any, rank: int, alpha: float, dropout: float, modules: List[str]) -> dict:
    hf = net.metadata.get("huggingface")
    base = hf["config"].get("_name_or_path") if isinstance(hf, dict) else None
    return {"peft_type": "LORA", "r": rank, "lora_alpha": alpha, "lora_dropout": dropout,
            "target_modules": modules, "base_model_name_or_path": base or None,
            "bias": "none", "fan_in_fan_out": False, "init_lora_weights": True,
            "inference_mode": True, "modules_to_save": None, "task_type": None,
            "use_rslora": False, "use_dora": False, "rank_pattern": {}, "alpha_pattern": {},
            "layers_to_transform": None, "layers_pattern": None}


def _write(folder: Path, config: dict, tensors: Dict[str, torch.Tensor]) -> None:
    from safetensors.torch import save_file
    if folder.exists() and not folder.is_dir():
        raise ArgumentError(f"save_adapter: '{folder}' is a file; give a folder to write "
                            f"{CONFIG} and {WEIGHTS} in.")
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / WEIGHTS), metadata={"format": "pt"})
    (folder / CONFIG).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


# -- loading ------------------------------------------------------------------------------------
# peft's settings that change what an adapter computes (a variant of LoRA, another scaling,
# biases, other trained tensors, a model of another shape): attnlab's adapters are plain LoRA,
# so a config that sets one is refused, never loaded as something else
_UNSUPPORTED = ("use_dora", "use_rslora", "bias", "lora_bias", "modules_to_save",
                "trainable_token_indices", "target_parameters", "layer_replication",
                "alora_invocation_tokens", "use_qalora", "kasa_config", "monteclora_config",
                "use_bdlora", "arrow_config")


def _unset(value: Any) -> bool:
    """Whether a config value leaves its setting off (peft writes false, null, "none", [])."""
    return value is None or value is False or value == "none" or \
        (isinstance(value, (list, dict)) and not value)


def _read_config(folder: Path) -> dict:
    try:
        config = json.loads(read_regular(folder / CONFIG, "load_adapter", 1 << 20))
    except (OSError, ValueError) as e:
        raise DataError(f"load_adapter: cannot read {folder / CONFIG}: {e}. Give the folder "
                        "peft's save_pretrained wrote.") from None
    if not isinstance(config, dict) or config.get("peft_type") != "LORA":
        raise DataError(f"load_adapter: {folder / CONFIG} is not a LoRA adapter (peft_type "
                        f"{config.get('peft_type') if isinstance(config, dict) else None!r}, "
                        "expected 'LORA').")
    for key in _UNSUPPORTED:
        if not _unset(config.get(key)):
            raise DataError(f"load_adapter: {CONFIG} sets {key}={config[key]!r}, which changes "
                            "what the adapter computes; attnlab's adapters are plain LoRA "
                            "(W x + lora_alpha/r · B A x). Save the adapter without it.")
    return config


Slot = Tuple[Target, int, int]        # an adapted map, its first row in the module, its rows


def _by_module(net: Any) -> Dict[str, List[Slot]]:
    """Module names peft may use → the (layer, projection) maps of this network whose weights
    the module's weight holds, each with its rows there (several for GPT-2's c_attn)."""
    # adapted maps stay candidates, so that an adapter for them is refused as already there
    candidates: List[Target] = [(site.name, p) for site, p in lora.maps(net)]
    table = _table(net, "load_adapter")
    params = net.learnables
    by: Dict[str, List[Slot]] = {}
    for t in candidates:
        module, parts = (lora.torch_name(t), (_learnable(t),)) if table is None else \
            table.get(_learnable(t), ("", ()))
        if module and all(p in params for p in parts):
            rows = [params[p].shape[0] for p in parts]
            k = parts.index(_learnable(t))
            by.setdefault(module, []).append((t, sum(rows[:k]), rows[k]))
    return by


def _pattern_value(config: dict, key: str, module: str) -> Any:
    """A module's entry of the config's rank_pattern or alpha_pattern by peft's rule (its
    get_pattern_key): the first key, a regular expression, that matches the module's whole
    name or its end after a '.'; else the config's own r or lora_alpha."""
    for pattern, value in (config.get(key) or {}).items():
        try:
            if re.match(rf"(.*\.)?({pattern})$", module):
                return value
        except re.error as e:
            raise DataError(f"load_adapter: {CONFIG}'s {key} key {pattern!r} is not a regular "
                            f"expression ({e}); peft reads these keys as ones.") from None
    return config.get("r" if key == "rank_pattern" else "lora_alpha")


def _numbers(config: dict, modules: List[str]) -> Dict[str, Tuple[Any, Any]]:
    """(rank, alpha) of each module: the config's, or its rank_pattern / alpha_pattern
    entry, read as peft reads them."""
    out = {}
    for m in modules:
        out[m] = (_pattern_value(config, "rank_pattern", m),
                  _pattern_value(config, "alpha_pattern", m))
        lora._check_numbers(*out[m], config.get("lora_dropout") or 0.0)
    return out


def _read_tensors(folder: Path, by: Dict[str, List[Slot]]) -> Dict[str, Dict[str, torch.Tensor]]:
    from safetensors.torch import load_file
    try:
        tensors = load_file(str(folder / WEIGHTS))
    except (OSError, ValueError, RuntimeError) as e:
        raise DataError(f"load_adapter: cannot read {folder / WEIGHTS}: {e}.") from None
    found: Dict[str, Dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        module, _, part = key[len(PREFIX):].rpartition(".lora_")
        if not key.startswith(PREFIX) or part not in ("A.weight", "B.weight") or module not in by:
            raise DataError(f"load_adapter: the tensor '{key}' names no linear map of this "
                            "network that an adapter can sit on. The adapter was saved for "
                            "another model.")
        found.setdefault(module, {})[part[0]] = value
    return found


def load_adapter(net: Any, path: str | os.PathLike) -> List[Target]:
    """Reads a LoRA adapter that peft saved (for the Hugging Face model of a from_pretrained
    network, or for this network) and adds it; returns the (layer, projection) adapted. A
    module whose weight holds several maps (GPT-2's c_attn: q|k|v) gives each an adapter with
    the module's A and its own rows of B: the same update, exactly."""
    folder = Path(path)
    config = _read_config(folder)
    lora._built(net)
    by = _by_module(net)
    found = _read_tensors(folder, by)
    numbers = _numbers(config, sorted(found))
    plan: List[Tuple[Target, Any, Any, torch.Tensor, torch.Tensor]] = []
    for module, parts in sorted(found.items()):  # every shape checked before any change
        r, alpha = numbers[module]
        _check_shapes(module, by[module], parts, r, net)
        plan += [(t, r, alpha, parts["A"], parts["B"][start:start + n])
                 for t, start, n in by[module]]
    order = {(site.name, p): i for i, (site, p) in enumerate(lora.maps(net))}
    plan.sort(key=lambda e: order[e[0]])
    lora.refuse_adapted(net, [e[0] for e in plan], "load_adapter")
    dropout = float(config.get("lora_dropout") or 0.0)
    for r, alpha in sorted({(e[1], e[2]) for e in plan}):
        lora.adapt(net, [e[0] for e in plan if (e[1], e[2]) == (r, alpha)], r, alpha, dropout)
    for t, _, _, a, b in plan:
        m = cast(lora.LoraLinear, lora.linear_at(net, *t))
        with torch.no_grad():
            m.lora_A.copy_(a)
            m.lora_B.copy_(b)
    return [e[0] for e in plan]


def _check_shapes(module: str, slots: List[Slot], parts: Dict[str, torch.Tensor], rank: int,
                  net: Any) -> None:
    base = lora.linear_at(net, *slots[0][0])
    rows = sum(n for _, _, n in slots)
    for part, shape in (("A", (rank, base.in_features)), ("B", (rows, rank))):
        x = parts.get(part)
        if x is None or tuple(x.shape) != shape:
            raise DataError(f"load_adapter: '{module}' lora_{part} is "
                            f"{'missing' if x is None else tuple(x.shape)}, expected {shape} "
                            "(r × in for A, out × r for B).")
