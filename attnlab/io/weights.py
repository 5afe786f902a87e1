"""A file's weights into the network: the tensors the graph implies (on the meta device,
nothing allocated), checked against the file's header (names, shapes, kinds, ties) before
the tensors are read, then tied and copied in."""
from __future__ import annotations

import copy
import math

import torch
from torch import nn

from attnlab.core.errors import AttnlabError, NetworkError
from .archive import _header, _read_tensors
from .messages import _first_line, _friendly, _listing, _show, legacy_keys
from .schema import LIMITS, _bad, _kind, _string

def _expected_tensors(net, where, params: set | None = None) \
        -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """key → (shape, dtype) of the state dict the graph implies, built on the meta device
    (and the keys that are parameters, not buffers, added to `params` when given)."""
    probe = copy.deepcopy(net)
    try:
        with torch.device("meta"):
            probe.initialize()
    except AttnlabError as e:
        raise NetworkError(f"cannot load '{where}': the saved network cannot be initialised "
                           f"to receive its weights: {e}") from e
    except (RuntimeError, NotImplementedError, ValueError, TypeError, OverflowError) as e:
        raise NetworkError(f"cannot load '{where}': the saved network cannot be built "
                           f"({type(e).__name__}: {_first_line(e)}).") from None
    state = probe.state_dict(keep_vars=True)
    if params is not None:
        params.update(k for k, t in state.items() if isinstance(t, nn.Parameter))
    return {k: (tuple(t.shape), t.dtype) for k, t in state.items()}


def _check_lazy_size(net, where):
    """A file without weights builds them at the first call: refuse one whose graph implies
    more than the limit, now, rather than let that call allocate it."""
    try:
        expected = _expected_tensors(net, where)
    except NetworkError:
        return                                       # not buildable yet: stays lazy, as saved
    total = sum(math.prod(s) * d.itemsize for s, d in expected.values())
    if total > LIMITS["lazy_weights_bytes"]:
        big = max(expected, key=lambda k: math.prod(expected[k][0]))
        raise NetworkError(f"cannot load '{where}': the graph (saved without weights) implies "
                           f"{total:,} bytes of weights ({_friendly(net, big)} alone is "
                           f"{'×'.join(map(str, expected[big][0]))}), over the limit of "
                           f"{LIMITS['lazy_weights_bytes']:,} (attnlab.io.LIMITS"
                           "['lazy_weights_bytes']); raise it if you trust this file.")



def _load_weights(net, z, info, where: str, shared=None):
    entries, start = _header(z, info, where)
    params: set[str] = set()
    mine = _expected_tensors(net, where, params)
    # an earlier file names the weights of dotted layer names with U+2024 for '.'
    named = [key for _, _, key, _, _ in entries] + (list(shared) if isinstance(shared, dict) else [])
    renamed = legacy_keys(net, mine, named)
    saved = {renamed.get(key, key): (shape, dtype) for _, _, key, shape, dtype in entries}
    if renamed and isinstance(shared, dict):
        shared = {renamed.get(a, a): renamed.get(k, k) if isinstance(k, str) else k
                  for a, k in shared.items()}
    ties = _shared_weights(net, shared, saved, mine, params, where)
    full = {**saved, **{alias: saved[key] for alias, key in ties.items()}}
    _check_fit(net, full, mine, where)
    target = _target_dtypes(net, full, mine, where)
    tensors = _read_tensors(z, info, entries, start)          # the only allocation for the file
    tensors = {renamed.get(k, k): t for k, t in tensors.items()}
    with torch.random.fork_rng(devices=[]):  # initialising must not move the caller's RNG
        torch.manual_seed(0)
        net.initialize()
    if target is not None:
        net.to(target)
    _tie(net, ties)
    tensors.update({alias: tensors[key] for alias, key in ties.items()})
    with torch.no_grad():
        own = dict(net.named_parameters(remove_duplicate=False))
        own.update(dict(net.named_buffers(remove_duplicate=False)))
        for key, t in own.items():
            if key in tensors and not t.is_floating_point() and t.dtype != tensors[key].dtype:
                tensors[key] = tensors[key].to(t.dtype)               # e.g. an int32 counter
    net.load_state_dict(tensors, strict=True)


def _shared_weights(net, shared, saved, mine, params, where) -> dict[str, str]:
    """The file's table of tied tensors (state-dict key → the key of the tensor it is, which
    alone the file holds), checked as the rest of the file: every alias a tensor the graph
    has and the file does not, every target one the file holds, of the same shape and kind."""
    if shared is None:
        return {}
    at = "shared_weights"
    if not isinstance(shared, dict):
        raise _bad(where, at, f"expected a JSON object, found {_kind(shared)}")
    if len(shared) > len(mine):
        raise _bad(where, at, f"{len(shared):,} entries for a network of {len(mine):,} tensors")
    limit = 64 * LIMITS["name_chars"]
    ties = {}
    for alias, key in shared.items():
        here = f"{at}.{_show(alias, 80)}"
        _string(alias, where, f"{at} (a key)", limit)
        _string(key, where, here, limit)
        if alias not in mine:
            raise _bad(where, here, "names no tensor of the network")
        if alias in saved:
            raise _bad(where, here, "is also stored in the weights; a tied tensor is stored once")
        if key not in saved:
            raise _bad(where, here, f"ties it to {_show(repr(key), 80)}, which the weights do "
                                    "not hold")
        if mine[alias][0] != mine[key][0] or saved[key][0] != mine[alias][0]:
            def dims(s):
                return "×".join(map(str, s)) or "scalar"
            raise _bad(where, here, f"ties {_friendly(net, alias)} ({dims(mine[alias][0])} in the "
                                    f"network) to {_friendly(net, key)} ({dims(saved[key][0])} in "
                                    "the file): the shapes differ")
        if (alias in params) != (key in params) or \
                mine[alias][1].is_floating_point != mine[key][1].is_floating_point:
            raise _bad(where, here, f"ties {_friendly(net, alias)} to {_friendly(net, key)}, "
                                    "which is another kind of tensor (parameter or buffer, "
                                    "floating point or not)")
        ties[alias] = key
    return ties


def _tie(net, ties):
    """Makes each alias the very tensor (Parameter or buffer) it was when saved."""
    def owner(key):
        path, _, attr = key.rpartition(".")
        return net.get_submodule(path), attr
    for alias, key in ties.items():
        mod, attr = owner(key)
        tensor = mod._parameters.get(attr) if attr in mod._parameters else mod._buffers.get(attr)
        mod, attr = owner(alias)
        if attr in mod._parameters:
            mod._parameters[attr] = tensor
        else:
            mod._buffers[attr] = tensor


def _check_fit(net, saved, mine, where):
    """The file's tensors (from its header) against the graph's: names and shapes."""
    def dims(s):
        return "×".join(map(str, s)) or "scalar"
    missing = [_friendly(net, k) for k in mine if k not in saved]
    extra = sorted(_friendly(net, _show(k, 80)) for k in saved if k not in mine)
    shapes = [f"{_friendly(net, k)}: file {dims(saved[k][0])}, network {dims(mine[k][0])}"
              for k in mine if k in saved and saved[k][0] != mine[k][0]]
    if missing or extra or shapes:
        parts = []
        if missing:
            parts.append(f"missing in the file: {_listing(missing)}")
        if extra:
            parts.append(f"in the file but not in the network: {_listing(extra)}")
        if shapes:
            parts.append(f"different sizes: {_listing(shapes)}")
        raise NetworkError(f"cannot load '{where}': the weights do not fit the network "
                           f"({'; '.join(parts)}). The graph and the weights in this file do not "
                           "belong together (or a Module factory builds a different module). "
                           "Nothing was allocated for them.")


def _target_dtypes(net, saved, mine, where):
    """The floating dtype the loaded network takes (the file's; the widest when the file mixes
    several, so values stay exact), after refusing tensors of the wrong kind."""
    floats = set()
    for k, (shape, want) in mine.items():
        got = saved[k][1]
        kind_ok = (got.is_floating_point == want.is_floating_point) and \
                  ((got is torch.bool) == (want is torch.bool))
        if not kind_ok:
            raise NetworkError(
                f"cannot load '{where}': {_friendly(net, k)} is {str(got)[6:]} in the file, but "
                f"the network keeps it as {str(want)[6:]} ({'floating point' if want.is_floating_point else 'integer'}"
                "). The file's weights were not written for this graph; save the network "
                "again with net.save().")
        if got.is_floating_point:
            floats.add(got)
    if not floats:
        return None
    order = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
    if floats == {torch.float16, torch.bfloat16}:
        return torch.float32                        # neither holds the other's values
    return max(floats, key=order.index)

