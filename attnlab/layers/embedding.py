"""Token embeddings."""
from __future__ import annotations

import torch
from torch import nn

from attnlab.core.errors import DataError
from attnlab.core.spec import Spec
from attnlab.core import checks as check
from .base import Layer
from .tying import TiesWeight, tied_to_argument


class Embedding(TiesWeight, Layer):
    """Token ids to vectors [wordEmbeddingLayer, embeddingLayer].

    Learnable `weight` (vocab×dim), laid out as in `torch.nn.Embedding`. Ids outside
    0…vocab−1 are a DataError naming the id and where it is (on the CPU; on other devices the
    row of a bad id is NaN, so that no step waits on a read back from the device).

    Parameters
    ----------
    vocab : int
        Number of token ids (the largest id + 1).
    dim : int
        Channels of each vector.
    tied_to : str, optional
        The name of another layer (an `Embedding`, or a `Dense` of out=vocab) whose `weight`
        this one shares, e.g. T5's decoder embedding tied to the encoder's. An output
        projection tied to this embedding says so itself: ``Dense(vocab, tied_to=<this
        layer's name>)``. The weight is one Parameter: counted once by `analyze()` and stored
        once in saved files.

    Shape
    -----
    - `in`: B×T token ids from a `TokenInput` (int64 whatever the network's dtype), or B×T×1
      integer-valued ids from a `SequenceInput(1)` (an input only Embedding layers read keeps
      integer ids too); directly, or through layers that keep ids, such as `Index1d` and
      `Concatenation`: computed values (a Dense output) are an analysis error
    - `out`: B×T×dim

    Examples
    --------
    >>> import torch, attnlab as al
    >>> from attnlab import layers as L
    >>> net = al.Network([L.SequenceInput(1), L.Embedding(10, 4)])
    >>> tuple(net(torch.tensor([[[1.0], [2.0], [9.0]]])).shape)
    (1, 3, 4)
    """

    time_local = True

    # the analysis refuses computed values here: ids come from an input layer, directly or
    # through layers that keep them (`keeps_ids`)
    reads_ids = ("in",)

    def __init__(self, vocab: int, dim: int, name: str | None = None, *,
                 tied_to: str | None = None):
        super().__init__(name)
        self.vocab = check.integer(self, "vocab", vocab, example=1000)
        self.dim = check.integer(self, "dim", dim, example=64)
        self.tied_to = tied_to_argument(self, tied_to)

    @property
    def ids_fix(self) -> str:
        """The other way out, for an analysis error on computed ids."""
        return f"Or, to map computed values to vectors, use Dense({self.dim}) in place of '{self.name}'."

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BTC", "BT"), "Embedding reads token ids, one channel per step.")
        check.learnables_fit(self, "in", "Use a smaller vocab or dim.", weight=(self.vocab, self.dim))
        if s.labels == "BTC":
            self.require_channels(s, "in", 1, "Token ids come as one channel: SequenceInput(1).")
        return Spec.sequence(self.dim, s.time)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _Embedding(self.vocab, self.dim, squeeze=specs["in"].labels == "BTC", layer=self.name)


class _Embedding(nn.Embedding):
    """nn.Embedding reading token ids given as floats (inputs take the network's dtype) or ints.

    Bad ids (fractional, negative, ≥ vocab, NaN) cost no host read on the happy path:
    a fractional or NaN id is turned into -1 (out of range on purpose), then

    - on the CPU the embedding kernel's own bounds check refuses it, and only then (the failure
      path) are the ids read back for a DataError naming the layer, the id, where it is and
      the vocabulary size;
    - on other devices a bad index would fire an asynchronous device-side assert that leaves
      the device unusable, and checking first would read back every call: there the lookup
      is clamped into range and the vectors of bad ids become NaN (which the training loop's
      finite-loss check, or the caller, sees). Validate ids on the CPU for the named error."""

    def __init__(self, vocab, dim, squeeze, layer=None):
        super().__init__(vocab, dim)
        self.squeeze = squeeze
        self.layer = layer

    def forward(self, x):
        if self.squeeze:
            x = x.squeeze(-1)                       # B×T×1 → B×T
        ids = x
        if x.is_floating_point():
            ids = x.long()
            ids = torch.where(ids == x, ids, -1)    # fractional or NaN: out of range on purpose
        elif x.dtype is torch.bool:
            ids = x.long()
        if ids.device.type != "cpu":
            return self.lookup_unchecked(ids)
        try:
            return torch.embedding(self.weight, ids)    # B×T×dim (F.embedding's defaults)
        except IndexError:
            raise bad_token_ids(x, self.num_embeddings, self.layer) from None

    def lookup_unchecked(self, ids: torch.Tensor) -> torch.Tensor:
        """The lookup without a host read or a device-side assert: ids outside 0…vocab−1 get
        NaN vectors (B×T×dim)."""
        bad = (ids < 0) | (ids >= self.num_embeddings)                      # B×T
        y = torch.embedding(self.weight, ids.clamp(0, self.num_embeddings - 1))
        return y.masked_fill(bad.unsqueeze(-1), float("nan"))


def bad_token_ids(x: torch.Tensor, vocab: int, layer: str | None) -> DataError:
    """The first bad token id in `x` (B×T), as a DataError (the failure path: host reads)."""
    where = f"layer '{layer}': " if layer else ""
    v = x.detach().to("cpu", torch.float64)
    bad = (v != v.round()) | (v < 0) | (v >= vocab)          # NaN is != itself: counted bad
    if not bool(bad.any()):        # the kernel refused something the checks here do not see
        return DataError(f"{where}the token ids could not be looked up in the vocabulary of {vocab} "
                         f"(ids 0…{vocab - 1}).")
    pos = [int(i) for i in bad.nonzero()[0]]
    at = (", ".join(f"{n} {i}" for n, i in zip(("observation", "step"), pos)) if len(pos) <= 2
          else f"position {tuple(pos)}")
    value = float(v[tuple(pos)])
    count = int(bad.sum())
    others = f" ({count} bad ids in all)" if count > 1 else ""
    if value != value or value != round(value):               # NaN or fractional
        return DataError(f"{where}token id {value} at {at} is not a whole number{others}: token ids "
                         f"are integers 0…{vocab - 1} (the vocabulary has {vocab} entries). Give "
                         "each token's index in the vocabulary.")
    return DataError(f"{where}token id {int(value)} at {at} is outside the vocabulary of {vocab} "
                     f"(ids 0…{vocab - 1}){others}. Make Embedding's vocab at least the largest id "
                     "+ 1, or map unknown tokens to a reserved id.")
