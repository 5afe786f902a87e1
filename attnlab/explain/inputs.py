"""What the explain functions share: a network's inputs as a dict, the kind of an input, its
token labels, and the scalar per batch item that a `target` picks from the outputs."""
from __future__ import annotations

from typing import Any, Callable, Union

from torch import Tensor

from attnlab.core.errors import ArgumentError, SizeError
from attnlab.core.sequences import Padded

Target = Union[int, tuple, Callable[[Any], Tensor]]


def called(net: Any) -> str:
    """The network in words: "network 'NAME'", or "the network" when it has no name."""
    return f"network '{net.name}'" if getattr(net, "name", None) else "the network"


def _value(v: Any) -> bool:
    return isinstance(v, (Tensor, Padded))


def as_dict(net: Any, inputs: Any, what: str) -> dict[str, Any]:
    """`inputs` by input name: a tensor (or `Padded` batch), the first input's, or a dict of
    them."""
    if _value(inputs):
        # the first input, as the network's forward takes one positional tensor (the others
        # it may leave out, such as Hugging Face's token_type_ids, or refuses by name)
        return {net.input_names[0]: inputs}
    if isinstance(inputs, dict) and all(_value(v) for v in inputs.values()):
        return dict(inputs)
    raise ArgumentError(f"{what}: expected the inputs as a tensor or al.Padded batch "
                        "(the first input's) or a dict of them by input name, received "
                        f"{type(inputs).__name__}. Pad sequences of different lengths first "
                        "(al.pad_sequences).")


def data(v: Any) -> Tensor:
    """The tensor of an input: itself, or a `Padded` batch's data."""
    return v.data if isinstance(v, Padded) else v


def kind_of(net: Any, name: str) -> str:
    """"tokens", "sequence", "image" or "features": what input `name` holds."""
    if name in net.token_inputs:
        return "tokens"
    spec = net.input_specs[name]
    return "sequence" if spec.is_sequence else "image" if spec.is_image else "features"


def token_labels(net: Any, inputs: dict[str, Tensor], name: str) -> list | None:
    """The token ids of input `name`, one list per batch item, when it holds tokens."""
    if name in net.token_inputs and name in inputs:
        ids = data(inputs[name])
        return [[int(i) for i in row] for row in ids.reshape(ids.shape[0], -1)]
    return None


def single_output(outputs: Any, what: str) -> Tensor:
    if isinstance(outputs, Tensor):
        return outputs
    raise ArgumentError(f"{what}: the network has several outputs ({', '.join(outputs)}), so "
                        "an index cannot say which. Give the target as a function of the "
                        "outputs, e.g. target=lambda out: out['logits'][:, -1, 7].")


def target_values(outputs: Any, target: Target, what: str) -> Tensor:
    """The scalar per batch item (a vector, B) that `target` picks: an output index (class),
    (position, class) for sequence outputs, or a function outputs → B values."""
    if callable(target):
        got = target(outputs)
        first = outputs if isinstance(outputs, Tensor) else next(iter(outputs.values()))
        if not isinstance(got, Tensor) or got.shape != first.shape[:1]:
            shape = tuple(got.shape) if isinstance(got, Tensor) else type(got).__name__
            raise ArgumentError(f"{what}: the target function must return one value per batch "
                                f"item (a tensor of size {first.shape[0]}), returned {shape}. Sum or index "
                                "each item's outputs to a scalar.")
        return got
    out = single_output(outputs, what)
    index = (target,) if isinstance(target, int) else tuple(target) \
        if isinstance(target, tuple) else None
    if index is None or not all(isinstance(i, int) for i in index):
        raise ArgumentError(f"{what}: target must be an output index (class), a (position, "
                            f"class) pair or a function of the outputs, received {target!r}.")
    if len(index) != out.dim() - 1:
        each = "×".join(map(str, out.shape[1:]))
        need = {1: "a class index", 2: "a (position, class) pair"}.get(
            out.dim() - 1, f"{out.dim() - 1} indices")
        raise ArgumentError(f"{what}: each item's output is {each}, so the target is {need}; "
                            f"received {target!r}. Or give a function of the outputs.")
    for i, (k, n) in enumerate(zip(index, out.shape[1:])):
        if not -n <= k < n:
            raise SizeError(f"{what}: target index {k} is outside the output's dimension "
                            f"{i + 1} of size {n}. Give one in {-n} … {n - 1}.")
    return out[(slice(None),) + index]


def repeat(x: Any, n: int) -> Any:
    """x (a tensor or `Padded` batch) repeated n times along the batch, step-major: item b of
    copy s at s·B + b."""
    if isinstance(x, Padded):
        return Padded(repeat(x.data, n), repeat(x.mask, n))
    return x.repeat(n, *([1] * (x.dim() - 1)))

