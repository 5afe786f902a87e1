"""LoRA adapters in peft's layout: `Network.save_adapter` and `Network.load_adapter`.

A folder holds adapter_config.json (peft_type "LORA", r, lora_alpha, target_modules, …) and
adapter_model.safetensors with "base_model.model.<module>.lora_A.weight" (r×in) and
".lora_B.weight" (out×r). <module> is the Hugging Face module's name for a network from
`al.from_pretrained` (read from its family's weight table), so that peft puts the adapter on
the Hugging Face model; for any other network it is the attnlab module path
("layer_modules.h.0.attn.query"), the name `peft.get_peft_model` sees on the network itself.
"""
from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, cast

import torch

from attnlab.core.errors import ArgumentError, DataError, NetworkError
from attnlab.core.reading import read_regular
from attnlab.graph.names import module_path
from attnlab.network import lora

__all__ = ["save_adapter", "load_adapter"]

CONFIG, WEIGHTS, PREFIX = "adapter_config.json", "adapter_model.safetensors", "base_model.model."
_PRETRAINED = "attnlab.pretrained"        # a front end, reached by name when called (as
_LAYOUT = "attnlab.pretrained.saving"     # Network.save_pretrained does): never imported here

Target = Tuple[str, Optional[str]]


def _learnable(target: Target) -> str:
    name, proj = target
    return f"{name}/{proj}.weight" if proj else f"{name}/weight"


def _shown(target: Target) -> str:
    return target[0] + (f"/{target[1]}" if target[1] else "")


def _pretrained_table(net: Any) -> Optional[Dict[str, str]]:
    """learnable weight name → its Hugging Face module, for a from_pretrained network (None
    otherwise); a tensor split into several learnables maps each to '' (adapted whole)."""
    pre = importlib.import_module(_PRETRAINED)
    meta = net.metadata.get(pre.META_KEY)
    if not isinstance(meta, dict) or "config" not in meta:
        return None
    layout = importlib.import_module(_LAYOUT).Layout.of(net, meta, pre.family)
    out: Dict[str, str] = {}
    for w in layout.family.weights(layout.cfg, layout.architecture):
        for name in w.learnables:
            whole = len(w.learnables) == 1 and w.name.endswith(".weight") and not w.reshape \
                and not w.interleave
            out[name] = w.name[:-len(".weight")] if whole else ""
    return out


def module_names(net: Any, targets: List[Target]) -> Dict[Target, str]:
    """Each adapted (layer, projection) → the module name peft knows it by."""
    table = _pretrained_table(net)
    out = {}
    for t in targets:
        if table is None:
            out[t] = ".".join(("layer_modules",) + module_path(t[0]) + ((t[1],) if t[1] else ()))
            continue
        hf = table.get(_learnable(t))
        if not hf:
            why = "is one part of a tensor that holds several (as GPT-2's c_attn holds q, k and " \
                  "v), which peft adapts whole" if hf == "" else "has no Hugging Face module"
            raise NetworkError(f"save_adapter: '{_shown(t)}' {why}, so peft's layout cannot say "
                               "its adapter. Adapt layers that are one Hugging Face Linear each "
                               "(e.g. Llama's q_proj, v_proj, a Dense layer).")
        out[t] = hf
    return out


def _one(values: set, what: str) -> Any:
    if len(values) != 1:
        raise NetworkError(f"save_adapter: the adapters have different {what} "
                           f"({', '.join(map(str, sorted(values)))}); peft's layout keeps one. "
                           "Add them in one add_lora call.")
    return values.pop()


def save_adapter(net: Any, path: str | os.PathLike) -> None:
    """Writes the network's adapters as peft saves them (see the module's description)."""
    found = lora.adapters(net)
    if not found:
        raise NetworkError("save_adapter: the network has no LoRA adapters. Add them with "
                           "net.add_lora(targets) first.")
    names = module_names(net, [(n, p) for n, p, _ in found])
    mods = [m for _, _, m in found]
    rank = _one({m.rank for m in mods}, "ranks")
    alpha = _one({m.alpha for m in mods}, "alphas")
    drops = {m.lora_dropout.p if isinstance(m.lora_dropout, torch.nn.Dropout) else 0.0
             for m in mods}
    tensors = {}
    for (n, p, m) in found:
        key = PREFIX + names[(n, p)]
        tensors[key + ".lora_A.weight"] = m.lora_A.detach().cpu().contiguous()
        tensors[key + ".lora_B.weight"] = m.lora_B.detach().cpu().contiguous()
    config = _config(net, rank, alpha, _one(drops, "dropouts"), sorted(set(names.values())))
    _write(Path(path), config, tensors)


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
_UNSUPPORTED: Tuple[Tuple[str, Any], ...] = (("use_dora", False), ("use_rslora", False), ("bias", "none"),
                ("modules_to_save", None), ("rank_pattern", {}), ("alpha_pattern", {}))


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
    for key, plain in _UNSUPPORTED:
        if config.get(key, plain) not in (plain, None, {}) or \
                (plain is False and config.get(key)):
            raise DataError(f"load_adapter: {CONFIG} sets {key}={config[key]!r}; attnlab's "
                            f"adapters are plain LoRA ({key}={plain!r}).")
    return config


def _by_module(net: Any, tensors: Dict[str, torch.Tensor]) -> Dict[str, Target]:
    """The file's modules → the (layer, projection) of this network that peft names so."""
    candidates: List[Target] = []
    for name in net._layers:
        if name not in net.layer_modules:
            continue
        m = net.layer_modules[name]
        if isinstance(m, torch.nn.Linear):
            candidates.append((name, None))
        candidates += [(name, p) for p in lora.PROJECTIONS
                       if isinstance(m._modules.get(p), torch.nn.Linear)]
    table = _pretrained_table(net)
    by: Dict[str, Target] = {}
    for t in candidates:
        hf = (table or {}).get(_learnable(t)) if table is not None else \
            ".".join(("layer_modules",) + module_path(t[0]) + ((t[1],) if t[1] else ()))
        if hf:
            by[hf] = t
    return by


def load_adapter(net: Any, path: str | os.PathLike) -> List[Target]:
    """Reads a LoRA adapter that peft saved (for the Hugging Face model of a from_pretrained
    network, or for this network) and adds it; returns the (layer, projection) adapted."""
    from safetensors.torch import load_file
    folder = Path(path)
    config = _read_config(folder)
    rank: Any = config.get("r")
    alpha: Any = config.get("lora_alpha")
    lora._check_numbers(rank, alpha, config.get("lora_dropout") or 0.0)
    try:
        tensors = load_file(str(folder / WEIGHTS))
    except (OSError, ValueError, RuntimeError) as e:
        raise DataError(f"load_adapter: cannot read {folder / WEIGHTS}: {e}.") from None
    lora._built(net)
    by = _by_module(net, tensors)
    found: Dict[Target, Dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        module, _, part = key[len(PREFIX):].rpartition(".lora_")
        if not key.startswith(PREFIX) or part not in ("A.weight", "B.weight") or module not in by:
            raise DataError(f"load_adapter: the tensor '{key}' names no linear map of this "
                            "network that an adapter can sit on. The adapter was saved for "
                            "another model, or adapts a layer attnlab holds fused.")
        found.setdefault(by[module], {})[part[0]] = value
    targets = sorted(found, key=lambda t: (list(net._layers).index(t[0]), str(t[1])))
    lora.refuse_adapted(net, targets, "load_adapter")
    for t in targets:                            # every shape checked before any change
        _check_shapes(net, t, found[t], rank)
    lora.adapt(net, targets, rank, alpha, float(config.get("lora_dropout") or 0.0))
    for t in targets:
        m = cast(lora.LoraLinear, lora._linear_at(net, *t))
        with torch.no_grad():
            m.lora_A.copy_(found[t]["A"])
            m.lora_B.copy_(found[t]["B"])
    return targets


def _check_shapes(net: Any, t: Target, parts: Dict[str, torch.Tensor], rank: int) -> None:
    base = lora._linear_at(net, *t)
    for part, shape in (("A", (rank, base.in_features)), ("B", (base.out_features, rank))):
        x = parts.get(part)
        if x is None or tuple(x.shape) != shape:
            raise DataError(f"load_adapter: '{_shown(t)}' lora_{part} is "
                            f"{'missing' if x is None else tuple(x.shape)}, expected {shape} "
                            "(r × in for A, out × r for B).")
