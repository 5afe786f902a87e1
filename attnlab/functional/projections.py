"""Self-attention's query, key and value projections as one matmul, and the same numbers
however their weights lie in memory.

Three bare `nn.Linear`s that read one input project it in one matmul against their weights
stacked row after row (q|k|v, and their biases likewise). The rounding of a matmul depends
on how its matrix lies in memory (row-major or transposed) and on its shape (one matmul
against q|k|v or three against q, k and v: BLAS blocks the sums by both), so every path
computes the same one: a module keeps q, k and v packed in one storage, row-major, one after
the other (`pack`: a module as built, moved or loaded from a file), and the matmul reads a
view of them; where they lie apart (weights placed one by one, a checkpoint's tensors
mapped apart) it reads their concatenation, made for the call: the same matrix, so the
same numbers, whatever the storage.

Decoding keeps no second copy: `stacked(…, copy=False)` gives a view or nothing.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

# the q|k|v weights of one matmul and their biases (None without biases)
Stacked = Tuple[Tensor, Optional[Tensor]]


def init_linear(lin: nn.Linear) -> None:
    # Glorot weights and zero biases: MATLAB's and Keras' defaults for attention projections
    nn.init.xavier_uniform_(lin.weight)
    if lin.bias is not None:
        nn.init.zeros_(lin.bias)


# the registries of hooks that run on every module (torch.nn.modules.module.
# register_module_forward_hook, …): mutated in place, so held once here
_GLOBAL_HOOKS = tuple(getattr(nn.modules.module, n) for n in (
    "_global_backward_pre_hooks", "_global_backward_hooks", "_global_forward_pre_hooks",
    "_global_forward_hooks", "_global_forward_hooks_always_called",
    "_global_forward_hooks_with_kwargs") if hasattr(nn.modules.module, n))


def global_module_hooks() -> bool:
    """Whether a hook that runs on every module is registered."""
    return any(_GLOBAL_HOOKS)


def plain_linear(m: Optional[nn.Module]) -> bool:
    """Whether `m` is a bare `nn.Linear` that nothing watches, so that reading its weight and
    bias (to fuse q, k and v into one matmul) computes exactly what calling it does.

    Anything else is called as a module: a subclass, a wrapper (peft's LoRA `Linear`), a
    parametrized Linear (`torch.nn.utils.parametrize` changes its class), a Linear with hooks
    of its own (forward, pre-forward, backward: weight_norm and spectral_norm are pre-forward
    hooks) or a `forward` set on the instance, and every projection while a global module hook
    is registered. Python checks only: cheap enough for every call, never a device sync."""
    return type(m) is nn.Linear and not (
        m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or
        m._backward_pre_hooks or "forward" in m.__dict__)


def fusable(mods: Sequence[Optional[nn.Module]]) -> bool:
    """Whether the projections `mods` may run as one matmul against their stacked weights:
    bare `nn.Linear`s (`plain_linear`) while no global module hook is registered."""
    return all(plain_linear(m) for m in mods) and not global_module_hooks()


def adjacent_rows(parts: Tuple[Tensor, ...], row_major: bool = False) -> Optional[Tensor]:
    """The tensors `parts` (same trailing sizes) as one, their rows one after the other,
    when they are already so in one storage: a view, no copy (detached: for use without
    gradients). None where they are not (each moved or loaded apart: `.to()`, an assignment
    of `.data`). `row_major`: only where each part is row-major too (each row's values one
    after the other), the layout of a packed module and of a concatenation."""
    first = parts[0].detach()
    size, stride = first.shape, first.stride()
    if first.dim() == 0 or first.is_meta:
        return None
    if row_major and not first.is_contiguous():
        return None
    ptr, storage, rows = first.data_ptr(), first.untyped_storage().data_ptr(), 0
    for t in parts:                             # each starts where the rows before it end
        if t.shape[1:] != size[1:] or t.stride() != stride or t.dtype != first.dtype or \
                t.device != first.device or t.untyped_storage().data_ptr() != storage or \
                t.data_ptr() != ptr + rows * stride[0] * first.element_size():
            return None
        rows += t.shape[0]
    return first.as_strided((rows,) + tuple(size[1:]), stride, first.storage_offset())


def _weights(mods: Sequence[nn.Linear]) -> Optional[Tuple[Tuple[Tensor, ...], tuple]]:
    """(the weights, the biases) of `mods`, or None where some have a bias and some not."""
    biases = tuple(m.bias for m in mods)
    if any(b is None for b in biases) and not all(b is None for b in biases):
        return None                              # a bias on some only: one call each
    return tuple(m.weight for m in mods), biases


def stacked(mods: Sequence[nn.Linear], copy: bool) -> Optional[Stacked]:
    """The weights (and biases) of the bare Linears `mods`, stacked row after row for one
    matmul; None where they must be called apart (a bias on some only).

    With gradients (and while tracing: a traced graph's constants) their concatenation,
    through which the gradients flow to each. Without: a view where they are packed
    row-major (`adjacent_rows`); else, with `copy`, their concatenation made for this call
    (the same matrix as the packed one, hence the same numbers), without it a view of rows
    that lie one after the other in another layout (GPT-2's Conv1D q|k|v, read in place from
    its file) or None."""
    found = _weights(mods)
    if found is None:
        return None
    weights, biases = found
    tensors = weights + (biases if biases[0] is not None else ())
    if (torch.is_grad_enabled() and any(t.requires_grad for t in tensors)) or \
            torch.jit.is_tracing() or torch.onnx.is_in_onnx_export():
        return torch.cat(weights), None if biases[0] is None else torch.cat(biases)
    for row_major in (True, False) if not copy else (True,):
        w = adjacent_rows(weights, row_major)
        b = None if biases[0] is None else adjacent_rows(biases, row_major)
        if w is not None and (biases[0] is None or b is not None):
            return w, b
    if not copy:
        return None
    return torch.cat(weights), None if biases[0] is None else torch.cat(biases)


def pack(mods: Sequence[nn.Linear], keep: bool = True) -> None:
    """Puts the weights (and biases) of the bare Linears `mods` in one storage, row-major, one
    after the other, so that `stacked` reads them in place. The Parameters stay (their
    `.data` becomes slices): names, state_dict keys, optimizers and ties are untouched.
    Nothing to do where they are already so or cannot be (on the meta device, of several
    dtypes or devices, a bias on some only). `keep`: their values are copied (else the new
    storage is left uninitialised, for a reset)."""
    for name in ("weight", "bias"):
        params = [getattr(m, name) for m in mods]
        if any(p is None for p in params) or params[0].is_meta or \
                len({(p.dtype, p.device) for p in params}) > 1 or \
                adjacent_rows(tuple(params), row_major=True) is not None:
            continue
        with torch.no_grad():
            whole = torch.cat([p.detach() for p in params]) if keep else \
                params[0].new_empty((sum(p.shape[0] for p in params),) + params[0].shape[1:])
        for p, piece in zip(params, whole.split([p.shape[0] for p in params])):
            p.data = piece
