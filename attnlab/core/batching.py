"""Mini-batching of network inputs (for predict now, for training later)."""
from __future__ import annotations

import numpy as np
import torch

from attnlab.core.torch_compile import maybe_compile
from attnlab.core.errors import ArgumentError, DataError, close_matches
from attnlab.core.precision import (autocast, autocast_dtype, check_compile, check_precision,
                                    resolve_device)
from attnlab.core.sequences import (MASK_KEYS, Padded, follows_hugging_face, hugging_face_inputs,
                                    hugging_face_positional, pad_sequences, unpad)
from attnlab.core.spec import Spec


def _length(x, name: str) -> int:
    """Observations in one input's value (predict's batching counts them before converting)."""
    if isinstance(x, Padded):
        return x.data.shape[0]
    if x is None or isinstance(x, (str, bytes, dict, set)):
        raise DataError(f"input '{name}': expected numbers (a tensor, an array or a list of "
                        f"sequences), received {_kind_of(x)}.")
    shape = getattr(x, "shape", None)
    if shape is not None:
        if len(shape) == 0:
            raise DataError(f"input '{name}': expected one entry per observation, received a "
                            "single number. Give the observations along the first dimension.")
        return shape[0]
    try:
        return len(x)
    except TypeError:
        raise DataError(f"input '{name}': expected numbers (a tensor, an array or a list of "
                        f"sequences), received {_kind_of(x)}.") from None


def _slice(x, i, j):
    if isinstance(x, Padded):
        return Padded(x.data[i:j], x.mask[i:j])
    return x[i:j]


def normalize_inputs(net, args, kwargs) -> dict:
    names = net.input_names
    if len(args) == 1 and isinstance(args[0], dict):
        return dict(args[0])
    if args and follows_hugging_face(net):         # read in transformers' positional order
        return hugging_face_positional(net, args, kwargs, names)
    if kwargs:
        return dict(kwargs)
    if len(args) != len(names):
        raise DataError(f"the network has {len(names)} input(s) ({', '.join(names)}), received "
                        f"{len(args)}. Pass them in this order, or as a dict by input name.")
    return dict(zip(names, args))


def unknown_inputs(given: dict, names) -> DataError:
    """The error for inputs by name that are not the network's `names`: the unknown ones
    (with close matches) and the missing ones. A padding mask given by name is no input: it
    goes with the input it pads, as `al.Padded`."""
    unknown = [k for k in given if k not in names]
    missing = [k for k in names if k not in given]
    hint = "".join(close_matches(k, names) for k in unknown)
    masks = [k for k in unknown if "mask" in k.lower()]
    if masks:
        hint += (f" '{masks[0]}' is no input of this network: a padding mask goes with the "
                 "sequence it pads, as al.Padded(x, mask) (mask B×T bool, True = real step), "
                 "or give a list of sequences of different lengths.")
    return DataError(f"inputs by name: expected {', '.join(names)}; "
                     + (f"unknown {', '.join(unknown)}.{hint} " if unknown else "")
                     + (f"missing {', '.join(missing)}." if missing else ""))


def batch_count(given: dict) -> int:
    counts = {k: _length(v, k) for k, v in given.items()}
    if len(set(counts.values())) > 1:
        raise DataError("inputs differ in the number of observations: "
                        + ", ".join(f"'{k}' has {n}" for k, n in counts.items())
                        + ". Every input needs one entry per observation.")
    n = next(iter(counts.values()), 0)
    if n == 0:
        name = next(iter(counts), "?")
        raise DataError(f"input '{name}': received an empty batch, 0 observations; give at least "
                        "one observation.")
    return n


def _by_convention(net, given: dict) -> dict:
    """Inputs by name as the network takes them: a Hugging Face dict (attention_mask beside
    the ids) made the network's own, so that its batches slice like any other."""
    if not follows_hugging_face(net):
        return given
    return hugging_face_inputs(given, net.input_names, net.token_inputs)


RUN_OPTIONS = ("device", "precision", "compile")


def run_options(net, kwargs: dict) -> dict:
    """Takes predict's `device`, `precision` and `compile` out of its keyword inputs (inputs
    by name come as keywords too; an input of the same name keeps its keyword)."""
    names = set(net.input_names)
    if follows_hugging_face(net):          # masks by name, beside the inputs they pad
        names |= set(MASK_KEYS)
    opts = {k: kwargs.pop(k) for k in RUN_OPTIONS if k in kwargs and k not in names}
    unknown = [k for k in kwargs if k not in names]
    if unknown:
        import difflib
        known = ("batch_size",) + RUN_OPTIONS
        close = difflib.get_close_matches(unknown[0], known + tuple(names), n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise ArgumentError(f"predict: unknown keyword '{unknown[0]}'.{hint} Keywords are the "
                            f"options {', '.join(known)} and the inputs by name "
                            f"({', '.join(net.input_names) or 'none'}).")
    return opts


@torch.no_grad()
def predict(net, args, kwargs, batch_size: int, device=None, precision: str = "fp32",
            compile=False):
    """Outputs for the inputs in mini-batches of `batch_size`, in eval mode.

    device: where to compute (None: where the network is; the network moves there, as
        `net.to`); precision: "fp32" | "bf16" | "fp16" | "auto" (autocast; outputs float32);
    compile: torch.compile the forward (falls back to eager with a warning). Outputs come back
    on the CPU when the inputs were not CUDA/MPS tensors, else on the compute device."""
    kwargs = dict(kwargs)
    opts = run_options(net, kwargs)
    device, precision, compile = (opts.get("device", device), opts.get("precision", precision),
                                  opts.get("compile", compile))
    check_precision(precision, "predict precision")
    check_compile(compile, "predict compile")
    check_batch_size(batch_size)
    given = normalize_inputs(net, args, kwargs)
    # lists of sequences give lists back; a mask beside the ids (Hugging Face's) a batch
    listed = any(isinstance(v, (list, tuple)) for v in given.values())
    given = _by_convention(net, given)
    n = batch_count(given)
    if device is not None:
        net.to(resolve_device(device, "predict device"))
    on = _device_of(net)
    half = autocast_dtype(precision, on, "predict precision")
    forward = maybe_compile(net.forward_with_masks, compile, on, "inference")
    back = _return_device(given, on)
    was_training = net.training
    net.eval()
    try:
        chunks = []
        for i in range(0, n, batch_size):
            part = {k: _to(_slice(v, i, i + batch_size), on) for k, v in given.items()}
            with autocast(on, half):
                outs, masks = forward(part)
            if half is not None:
                outs = {k: v.float() if v.dtype in _HALF else v for k, v in outs.items()}
            chunks.append((outs, masks))
    finally:
        net.train(was_training)
    result: dict[str, torch.Tensor | list[torch.Tensor]] = {}
    for name in chunks[0][0]:
        if listed and chunks[0][0][name].dim() == 3:
            seqs = []
            for outs, masks in chunks:
                seqs += unpad(outs[name].to(back), None if masks[name] is None
                              else masks[name].to(back))
            result[name] = seqs
        else:
            result[name] = torch.cat([outs[name] for outs, _ in chunks]).to(back)
    return result[next(iter(result))] if len(result) == 1 else result


_HALF = (torch.float16, torch.bfloat16)


def _device_of(net) -> torch.device:
    """Where the network computes (a lazy one: where its last .to() put it). A network not yet
    initialised builds its modules there on the first batch: asking it for its parameters
    would only warn that it has none yet."""
    ref = next(iter(net.parameters()), None) if getattr(net, "initialized", True) else None
    if ref is not None:
        return ref.device
    target = getattr(net, "_target", None)
    return target[1] if target and target[1] is not None else torch.device("cpu")


def _to(x, device):
    """A batch part onto the compute device: tensors (and Padded) copied there, pinned and
    non-blocking on CUDA; lists and arrays are converted by the forward pass itself."""
    if device.type == "cpu":
        return x
    if isinstance(x, Padded):
        return Padded(_to(x.data, device), x.mask.to(device))
    if isinstance(x, torch.Tensor) and x.device != device:
        if device.type == "cuda" and x.device.type == "cpu":
            x = x.pin_memory()
        return x.to(device, non_blocking=True)
    if isinstance(x, np.ndarray):
        return _to(torch.as_tensor(x), device)
    return x


def _return_device(given: dict, on: torch.device) -> torch.device:
    """Outputs go back where the inputs were: the compute device for device tensors, else
    the CPU (lists, arrays, CPU tensors)."""
    for v in given.values():
        t = v.data if isinstance(v, Padded) else v
        if isinstance(t, torch.Tensor) and t.device.type != "cpu":
            return on
    return torch.device("cpu")


def as_batch(x, spec: Spec, name: str, dtype, ids: bool = False):
    """One input value → (tensor, mask or None), checked against the input's spec.

    Values become `dtype` (the network's float dtype), except token ids: those of a B×T
    `TokenInput` become int64 (`token_ids`), and with `ids` (an input read only as ids, see
    `id_inputs`) integers become int64 and floats stay as given, so that no id is rounded.
    The forward pass calls this only off its hot path (anything but a tensor of the right shape
    and dtype), so the checks here cost nothing to a right call."""
    mask = None
    tokens = spec.labels == "BT"
    if isinstance(x, Padded):
        x, mask = _padded(x, name)
    elif isinstance(x, (list, tuple)):
        x, mask = _from_list(x, spec, name, None if tokens or ids else dtype)
    elif not isinstance(x, torch.Tensor):
        x = array_tensor(x, spec, name)
    check_values(x, spec, name)
    if tokens:
        x = token_ids(x, name)
    elif ids and not x.is_floating_point():
        x = x.long()
    elif x.dtype != dtype and x.dtype != torch.bool and not ids:
        x = x.to(dtype)
    if x.dim() != len(spec.labels) or any(
            s is not None and i > 0 and s != n for i, (s, n) in enumerate(zip(spec.sizes, x.shape))):
        raise DataError(f"input '{name}': expected {spec}, received "
                        f"{'×'.join(map(str, x.shape))}. {_shape_fix(x, spec)}".rstrip())
    return x, mask


def token_ids(x: torch.Tensor, name: str, what: str = "input") -> torch.Tensor:
    """A B×T (or B×T×1) tensor of token ids → B×T int64. Whole-number floats are read as ids
    (a host read, off the hot path); fractional or non-finite ones are a DataError."""
    if x.dim() == 3 and x.shape[-1] == 1:
        x = x.squeeze(-1)                                   # B×T×1 (al.pad_sequences) → B×T
    if x.dtype is torch.int64:
        return x
    if not x.is_floating_point():
        return x.long()
    v = x.detach()
    bad = ~torch.isfinite(v) | (v != v.round())
    if bool(bad.any()):
        pos = tuple(int(i) for i in bad.nonzero()[0])
        at = ", ".join(f"{n} {i}" for n, i in zip(("observation", "step"), pos))
        raise DataError(f"{what} '{name}': token id {float(v[pos])} at {at} is not a whole number: "
                        "token ids are integers, each token's index in the vocabulary. Give an "
                        "integer tensor (e.g. ids.long()).")
    return x.long()


def id_inputs(net) -> list[bool]:
    """Per input of `net` (in `input_names` order): True when its values are token ids, kept
    integers and never cast to the network's float dtype — a `TokenInput` (B×T), or an input
    whose every consumer reads ids (an `Embedding`), directly or through layers that pass ids
    on unchanged (`keeps_ids`) and nested networks."""
    out = []
    for name in net.input_names:
        layer_name, port = net.port_of(name)
        layer = net.layer_map[layer_name]
        if layer.is_input:
            out.append(layer.spec.labels == "BT" or
                       _read_as_ids(net, {(layer_name, p) for p in layer.output_ports}))
        else:
            out.append(_port_reads_ids(net, layer_name, port))
    return out


def _read_as_ids(net, sources: set) -> bool:
    """True when the outputs `sources` ((layer, port) pairs) feed only ports that read ids."""
    readers = [dst for dst, src in net.sources.items() if src in sources]
    return bool(readers) and all(_port_reads_ids(net, n, p) for n, p in readers)


def _port_reads_ids(net, name: str, port: str) -> bool:
    layer = net.layer_map[name]
    if port in getattr(layer, "reads_ids", ()):
        return True
    if getattr(layer, "keeps_ids", False):
        return _read_as_ids(net, {(name, p) for p in layer.output_ports})
    if hasattr(layer, "layer_map") and hasattr(layer, "input_names"):  # a nested network
        names = list(layer.input_names)
        return port in names and id_inputs(layer)[names.index(port)]
    return False


def expected(spec: Spec | None) -> str:
    """What an input takes, in words: 'numbers B×T×3 (a tensor, an array or a list of T_i×3
    sequences)'."""
    if spec is None:
        return "numbers (a tensor, an array or a list of sequences)"
    if spec.labels == "BT":
        return f"token ids {spec} (an integer tensor or array, or a list of 1-D id sequences)"
    if spec.is_sequence:
        per_step = "T_i" if spec.channels is None else f"T_i×{spec.channels}"
        return f"numbers {spec} (a tensor, an array or a list of {per_step} sequences)"
    return f"numbers {spec} (a tensor or an array)"


def _kind_of(x) -> str:
    if x is None:
        return "None"
    if isinstance(x, bytes):
        return f"a string {x if len(x) <= 20 else x[:19] + b'...'!r}"
    if isinstance(x, str):
        text = x if len(x) <= 20 else x[:19] + "…"
        return f"a string {text!r}"
    return f"a {type(x).__name__}"


def _refuse_non_numbers(x, spec: Spec | None, name: str, what: str = "input") -> None:
    if x is None or isinstance(x, (str, bytes, dict, set)):
        fix = (" Text goes in as token ids: map each token to an int with a vocabulary first."
               if isinstance(x, (str, bytes)) else
               " A dict gives several inputs by name, at the top level only." if isinstance(x, dict)
               else "")
        raise DataError(f"{what} '{name}': expected {expected(spec)}, received {_kind_of(x)}.{fix}")


def _numeric_dtype(kind: str, dtype, name: str, spec: Spec | None, what: str = "input") -> None:
    """DataError unless numpy dtype kind `kind` is bool/int/float (complex, strings, objects)."""
    if kind in "biuf":
        return
    if kind == "c":
        raise DataError(f"{what} '{name}': received complex numbers ({dtype}); attnlab networks "
                        "are real-valued and casting would drop the imaginary part. Give the real "
                        "and imaginary parts as channels (torch.view_as_real(x).flatten(-2)) or "
                        "x.abs() / x.real, as the model needs.")
    if kind in "USO":
        raise DataError(f"{what} '{name}': expected {expected(spec)}, received an array of {dtype}"
                        + (" (strings). Map text to token ids first." if kind in "US" else
                           " (Python objects: None, strings, or rows of different lengths)."))
    raise DataError(f"{what} '{name}': expected {expected(spec)}, received an array of {dtype}.")


def array_tensor(x, spec: Spec | None, name: str, what: str = "input") -> torch.Tensor:
    _refuse_non_numbers(x, spec, name, what)
    try:
        a = np.asarray(x)
    except ValueError as e:               # numpy ≥ 1.24 refuses ragged nesting
        raise DataError(f"{what} '{name}': the rows have different lengths ({e}). Give one "
                        f"array N×…, or {expected(spec)}.") from None
    _numeric_dtype(a.dtype.kind, a.dtype, name, spec, what)
    return torch.as_tensor(a)


def observation(s, i: int, spec: Spec | None, name: str, what: str = "input"):
    """Observation i of a list as a tensor, checked to hold numbers."""
    if isinstance(s, torch.Tensor):
        if s.is_complex():
            _numeric_dtype("c", s.dtype, name, spec, what)
        return s
    if s is None or isinstance(s, (str, bytes, dict, set)):
        raise DataError(f"{what} '{name}': observation {i} is {_kind_of(s)}; expected "
                        f"{expected(spec)}.")
    try:
        a = np.asarray(s)
    except ValueError:
        raise DataError(f"{what} '{name}': observation {i} has rows of different lengths; each "
                        f"observation needs one size per step (expected {expected(spec)}).") from None
    if a.dtype.kind not in "biuf":
        _numeric_dtype(a.dtype.kind, a.dtype, f"{name}", spec, what)
    return torch.as_tensor(a)


def _from_list(seqs, spec: Spec, name: str, dtype, what: str = "input"):
    """A list of observations → (N×… tensor, mask or None): sequences padded, others stacked."""
    if not seqs:
        raise DataError(f"{what} '{name}': received an empty list; expected at least one "
                        f"observation: {expected(spec)}.")
    items = [observation(s, i, spec, name, what) for i, s in enumerate(seqs)]
    if spec.labels == "BT":
        return _token_list(items, name, what)
    if spec.is_sequence and all(t.dim() in (1, 2) for t in items):
        if len({t.dim() for t in items}) > 1:
            dims = sorted({t.dim() for t in items})
            i = next(i for i, t in enumerate(items) if t.dim() != items[0].dim())
            raise DataError(f"{what} '{name}': the sequences mix {dims[0]}-D and {dims[1]}-D arrays "
                            f"(observation 0 is {items[0].dim()}-D, observation {i} "
                            f"{items[i].dim()}-D); give each as T_i×C.")
        items = [t.unsqueeze(-1) if t.dim() == 1 else t for t in items]
        widths = [t.shape[1] for t in items]
        want = spec.channels if spec.channels is not None else widths[0]
        bad = next((i for i, w in enumerate(widths) if w != want), None)
        if bad is not None:
            raise DataError(f"{what} '{name}': sequence {bad} has {widths[bad]} channel(s) per step, "
                            f"expected {want} ({spec}); channel counts received: "
                            f"{sorted(set(widths))}. Every step of every sequence needs the same "
                            "channels.")
        empty = next((i for i, t in enumerate(items) if t.shape[0] == 0), None)
        if empty is not None:
            raise DataError(f"{what} '{name}': sequence {empty} has 0 time steps; every sequence "
                            "needs at least one. Drop the empty sequences (and their targets).")
        x, mask = pad_sequences(items, dtype=dtype)
        return x, (None if bool(mask.all()) else mask)     # equal lengths: no padding to carry
    shapes = [tuple(t.shape) for t in items]
    bad = next((i for i, sh in enumerate(shapes) if sh != shapes[0]), None)
    if bad is not None:
        show = lambda sh: "×".join(map(str, sh)) or "a scalar"      # noqa: E731
        raise DataError(f"{what} '{name}': observation {bad} is {show(shapes[bad])}, observation 0 "
                        f"is {show(shapes[0])}; every observation needs the same size (expected "
                        f"{expected(spec)}).")
    return torch.stack(items), None


def _token_list(items: list, name: str, what: str = "input"):
    """1-D id sequences (or T_i×1) → (B×T ids padded with 0, mask or None)."""
    items = [t.squeeze(-1) if t.dim() == 2 and t.shape[-1] == 1 else t for t in items]
    bad = next((i for i, t in enumerate(items) if t.dim() != 1), None)
    if bad is not None:
        raise DataError(f"{what} '{name}': observation {bad} is "
                        f"{'×'.join(map(str, items[bad].shape)) or 'a scalar'}; token ids come as "
                        "one 1-D sequence of ids per observation.")
    empty = next((i for i, t in enumerate(items) if t.shape[0] == 0), None)
    if empty is not None:
        raise DataError(f"{what} '{name}': sequence {empty} has 0 tokens; every sequence needs at "
                        "least one. Drop the empty sequences (and their targets).")
    items = [token_ids(t.unsqueeze(0), name, what)[0] for t in items]
    x = torch.nn.utils.rnn.pad_sequence(items, batch_first=True)                    # B×T
    lengths = torch.tensor([t.shape[0] for t in items], device=x.device)
    mask = torch.arange(x.shape[1], device=x.device).unsqueeze(0) < lengths.unsqueeze(1)
    return x, (None if bool(mask.all()) else mask)


def _padded(p: Padded, name: str):
    data, mask = p.data, p.mask
    if not isinstance(data, torch.Tensor) or not isinstance(mask, torch.Tensor):
        raise DataError(f"input '{name}': a Padded batch holds tensors, received data "
                        f"{type(data).__name__} and mask {type(mask).__name__}. Make it with "
                        "al.pad_sequences(list_of_sequences).")
    if mask.dtype != torch.bool or mask.dim() != 2 or tuple(mask.shape) != tuple(data.shape[:2]):
        raise DataError(f"input '{name}': the Padded mask must be a bool B×T tensor matching the "
                        f"data {'×'.join(map(str, data.shape))}, received "
                        f"{'×'.join(map(str, mask.shape))} {mask.dtype}. Make it with "
                        "al.pad_sequences(list_of_sequences).")
    return data, mask


def check_values(x: torch.Tensor, spec: Spec | None, name: str, what: str = "input") -> None:
    """DataError for a tensor that cannot be an input's value whatever its shape: complex or
    non-numeric, on the meta device (no data), no observations, or sequences of zero steps.
    No host sync (only the tensor's metadata is read)."""
    if x.is_complex():
        _numeric_dtype("c", x.dtype, name, spec, what)
    if x.is_meta:
        raise DataError(f"{what} '{name}': the tensor is on the meta device, which has sizes but "
                        f"no values ({'×'.join(map(str, x.shape))}). Give a tensor with data, e.g. "
                        "on the network's device.")
    if x.dim() == 0:
        raise DataError(f"{what} '{name}': expected {expected(spec)}, received a single number "
                        f"({x.dtype}). Give one entry per observation along the first dimension.")
    if x.shape[0] == 0:
        raise DataError(f"{what} '{name}': received an empty batch, 0 observations "
                        f"({'×'.join(map(str, x.shape))}); expected {expected(spec)} with at least "
                        "one observation.")
    if spec is not None and spec.is_sequence and x.dim() == len(spec.labels) and \
            x.shape[spec.labels.index("T")] == 0:
        raise DataError(f"{what} '{name}': the sequences have 0 time steps "
                        f"({'×'.join(map(str, x.shape))}); every sequence needs at least one.")


def check_batch_size(batch_size, where: str = "predict") -> int:
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ArgumentError(f"{where} batch_size must be a whole number ≥ 1, received "
                            f"{batch_size!r}.")
    return batch_size


def _shape_fix(x, spec: Spec) -> str:
    if spec.labels == "BT":
        return ("A single sequence needs a batch dimension: ids.unsqueeze(0)." if x.dim() == 1
                else "Token ids are B×T: one row of ids per observation.")
    if spec.is_sequence and x.dim() == 2:
        if spec.channels == 1:
            return "Add the channel dimension: x.unsqueeze(-1) (B×T → B×T×1)."
        if x.shape[-1] == spec.channels:
            return "A single sequence needs a batch dimension: x.unsqueeze(0), or pass a list of sequences."
    if spec.is_sequence and x.dim() == 3 and x.shape[1] == spec.channels:
        return "Sequences are batch-first B×T×C in attnlab: use x.transpose(1, 2)."
    if spec.is_image and x.dim() == 4 and x.shape[-1] == spec.channels:
        return "Images are B×C×H×W in attnlab: use x.permute(0, 3, 1, 2)."
    if spec.is_image and x.dim() == 3:
        return "Add the channel dimension: x.unsqueeze(1) (B×H×W → B×1×H×W)."
    return "Check the sizes the input layer was declared with."


def input_problem(names, specs, values, device=None) -> DataError | None:
    """For the forward pass's failure path (a torch error while running the plan): the input
    to blame, if one is — a meta tensor, a complex or empty one, or a tensor on another device
    than the network's parameters (`device`) — as a DataError naming it, else None. Reads only
    tensor metadata."""
    for name, spec, x in zip(names, specs, values):
        if not isinstance(x, torch.Tensor):
            continue
        try:
            check_values(x, spec, name)
        except DataError as e:
            return e
        if device is not None and x.device != torch.device(device):
            return DataError(f"input '{name}': the tensor is on {x.device}, the network's "
                             f"parameters on {device}. Move one to the other: x.to('{device}') "
                             f"or net.to('{x.device}').")
    return None
