"""The key/value cache of streamed causal attention: preallocated head-major buffers that
double when full, and, for a sliding window, drop the steps no later query can see."""
from __future__ import annotations

import torch
from torch import Tensor


class KVCache:
    """Keys and values of every step so far, in preallocated head-major buffers
    B×heads×capacity×dk and B×heads×capacity×dv (the layout the attention kernel reads fastest,
    as a hand-written cache keeps them), whose capacity doubles when full: appending t steps
    copies those t steps only (a doubling copies the n cached ones, O(1) amortised per step).

    `heads` is the number of key/value heads (fewer than the query's with grouped-query
    attention); `k`/`v` are None until the first append, `n` the steps held, `capacity` the
    steps the buffers hold, `start` the stream position of the first step held (`pos`, the
    position of the next step, is `start + n`).

    With a sliding `window` (a query sees itself and the `window − 1` steps before it) only the
    last `window − 1` steps matter to later queries: when the buffers are full and those steps
    fit in half of them, `compact` moves them to the front instead of growing, so the memory
    stays below about 2·(window + t) steps however long the stream runs (each move copies
    `window − 1` steps and frees at least half the buffer: O(1) amortised per step)."""

    def __init__(self, capacity: int = 64, heads: int = 1, window: int | None = None):
        self.capacity0 = max(1, int(capacity))
        self.heads = int(heads)
        self.window = window
        self.start = 0
        self.k: Tensor | None = None
        self.v: Tensor | None = None
        # views of the slots the next steps write and the prefixes they attend to, made a
        # chunk at a time as decoding reaches them, so that a decoding step indexes a list
        # instead of slicing tensors (each slice is a ~1 µs call, a step makes 4 per layer):
        # k_slots[n - base], B×heads×d, takes step n's key; k_prefix[n - base],
        # B×heads×(n+1)×d, is what query n attends to. Only the current chunk is held: a view
        # costs ~450 bytes of host memory, and one per step and layer for a whole decode
        # would be a few MiB, as much as the cache itself on a small model
        self.k_slots: list[Tensor] = []
        self.v_slots: list[Tensor] = []
        self.k_prefix: list[Tensor] = []
        self.v_prefix: list[Tensor] = []
        self.base = 0
        # steps base…ready−1 have their views, in buffers checked to fit the keys arriving
        # since the last reset (a one-step decode then compares one int; 0 forces a check)
        self.ready = 0
        self.n = 0

    @property
    def capacity(self) -> int:
        return 0 if self.k is None else self.k.shape[2]

    @property
    def pos(self) -> int:
        """The stream position of the next step."""
        return self.start + self.n

    def reset(self) -> None:
        self.n = self.ready = self.start = 0

    def rewind(self, pos: int) -> None:
        """Forgets the steps from stream position `pos` on (those of a step that failed), no
        copy: what `grow` moved to new buffers is kept there, and steps a window's `compact`
        dropped stay dropped (no query from `pos` on sees them). Their slots are zeroed, as a
        static-shape step wants a masked-out slot (a failed step may have written NaN)."""
        n = max(0, min(self.n, pos - self.start))
        self.ready = 0                                  # views from the new n on, if gone
        if self.k is not None and self.v is not None and n < self.n:
            self.k[:, :, n:self.n].zero_()
            self.v[:, :, n:self.n].zero_()
        self.n = n

    def compact(self, t: int) -> None:
        """Room for t more steps of a windowed cache without growing: when the buffers are
        full, the last `window − 1` steps move to the front (the others no later query sees),
        if they and the t new ones fit in half the buffers; otherwise the next append grows."""
        if self.window is None or self.k is None or self.v is None or \
                self.n + t <= self.capacity:
            return
        keep = min(self.n, self.window - 1)
        drop = self.n - keep
        if drop <= 0 or keep + t > self.capacity // 2:
            return
        n = self.n
        self.k[:, :, :keep] = self.k[:, :, drop:n].clone()      # the ranges may overlap
        self.v[:, :, :keep] = self.v[:, :, drop:n].clone()
        self.start += drop
        self.n = keep
        self.ready = 0                                  # views from the new n on, if gone

    def make_ready(self, k: Tensor, v: Tensor, end: int) -> None:
        """Buffers that take keys like k, v up to step `end`, with the views of step `end − 1`
        and a chunk after it (`_CHUNK` steps); the views behind are dropped."""
        if not self.fits(k, end):
            self.grow(k, v, end)
        kc, vc = self.k, self.v
        assert kc is not None and vc is not None       # for mypy: grow made them
        first = end - 1
        if not self.base <= first < self.base + len(self.k_prefix):
            upto = min(kc.shape[2], first + _CHUNK)
            self.k_slots = list(kc[:, :, first:upto].unbind(2))
            self.v_slots = list(vc[:, :, first:upto].unbind(2))
            self.k_prefix = _prefixes(kc, first, upto)
            self.v_prefix = _prefixes(vc, first, upto)
            self.base = first
        self.ready = self.base + len(self.k_prefix)

    def fits(self, k: Tensor, end: int) -> bool:
        """True when the buffers take steps up to `end` of keys like k (batch, dtype, device)."""
        return self.holds(end, k.shape[0], k.dtype, k.device)

    def holds(self, end: int, batch: int, dtype: torch.dtype, device: torch.device) -> bool:
        """True when the buffers take steps up to `end` of a batch of that type and device."""
        c = self.k
        return c is not None and end <= c.shape[2] and c.shape[0] == batch and \
            c.dtype == dtype and c.device == device

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """k B×t×(heads·dk), v B×t×(heads·dv) → every key and value so far, views
        B×heads×n×dk and B×heads×n×dv."""
        b, t, h = k.shape[0], k.shape[1], self.heads
        self.compact(t)
        n, end = self.n, self.n + t
        if not self.fits(k, end):
            self.grow(k, v, end)
        kc, vc = self.k, self.v
        assert kc is not None and vc is not None       # for mypy: grow made them
        kc[:, :, n:end] = k.view(b, t, h, -1).transpose(1, 2)
        vc[:, :, n:end] = v.view(b, t, h, -1).transpose(1, 2)
        self.n = end
        return kc[:, :, :end], vc[:, :, :end]

    def grow(self, k: Tensor, v: Tensor, end: int, zeros: bool = False) -> None:
        """New buffers for keys/values like k, v holding at least `end` steps, filled with
        zeros when `zeros` (else uninitialised); the cached steps are kept when the batch is
        the same (else the cache starts again)."""
        old_k, old_v, n = self.k, self.v, self.n
        keep = old_k is not None and old_v is not None and old_k.shape[0] == k.shape[0] and n > 0
        cap = max(self.capacity0, end, 2 * (old_k.shape[2] if keep and old_k is not None else 0))
        b, h = k.shape[0], self.heads
        self.k = (k.new_zeros if zeros else k.new_empty)(b, h, cap, k.shape[-1] // h)
        self.v = (v.new_zeros if zeros else v.new_empty)(b, h, cap, v.shape[-1] // h)
        if keep and old_k is not None and old_v is not None:
            self.k[:, :, :n] = old_k[:, :, :n]
            self.v[:, :, :n] = old_v[:, :, :n]
        else:
            self.n = self.start = 0
        self.k_slots, self.v_slots, self.k_prefix, self.v_prefix = [], [], [], []
        self.base = self.ready = 0


# the steps whose slot and prefix views are made at a time (four views per step)
_CHUNK = 64


def _prefixes(buf: Tensor, start: int, stop: int) -> list[Tensor]:
    """buf[:, :, :i + 1] for i in start…stop−1, B×H×(i+1)×d each, made with as_strided (half
    the cost of slicing)."""
    b, h, _, d = buf.shape
    stride, offset = buf.stride(), buf.storage_offset()
    return [buf.as_strided((b, h, i + 1, d), stride, offset) for i in range(start, stop)]
