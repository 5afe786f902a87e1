"""Position information for attention, which is otherwise blind to order. The embedding and
encoding layers output only the position signal (as MATLAB's): add it to the sequence with
`Addition`. `RelativePositionBias` gives attention layers T5's additive score bias instead.
(Rotary embeddings and ALiBi are options of the attention layers themselves.)"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from attnlab.functional.bias import relative_position_bucket, relative_positions
from attnlab.core.errors import DataError, SizeError
from attnlab.core.sequences import mask_positions
from attnlab.core.spec import Spec
from attnlab.core import checks as check
from .base import Layer


class PositionEmbedding(Layer):
    """Learned position embedding [positionEmbeddingLayer].

    Outputs the embedding of positions 0…T−1 only (add it to the input with `Addition`).
    Learnable `weight` (max_length×channels).

    Parameters
    ----------
    max_length : int
        The rows of its table: the longest sequence it embeds, plus `offset`.
    channels : int or None
        Channels of the embedding; None: the input's channels.
    offset : int
        The row of position 0 (OPT's learned positions start at row 2): position p is row
        p + offset, so it embeds sequences of up to max_length − offset steps.
    positions : "index" or "mask"
        The position of each step: "index", its index 0…T−1; "mask", its place among its
        sequence's real steps (`al.Padded` / a list of sequences / Hugging Face's
        `attention_mask`), as transformers' position ids from an attention mask — a sequence
        padded in front then starts at position 0 too. Without padding, or with padding at
        the end, both give the real steps 0…n−1.

    Shape
    -----
    - `in`: B×T×C with T ≤ max_length − offset
    - `out`: B×T×channels (channels defaults to C)
    """

    stem = "posembed"
    uses_mask = True             # positions="mask" reads the padding

    def __init__(self, max_length: int, channels: int | None = None, name: str | None = None, *,
                 offset: int = 0, positions: str = "index"):
        super().__init__(name)
        self.positions = check.choice(self, "positions", positions, ("index", "mask"))
        self.max_length = check.integer(self, "max_length", max_length, example=512)
        self.channels = check.integer(self, "channels", channels, none_ok=True)
        self.offset = check.integer(self, "offset", offset, least=0, example=2)
        if self.offset >= self.max_length:
            raise check.fail(self, "offset", f"a row of the table (less than max_length "
                             f"{self.max_length})", offset, "Raise max_length: it counts the "
                             "rows before position 0 too.")

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BTC",), "PositionEmbedding gives each time step its position.")
        check.learnables_fit(self, "in", "Use a smaller max_length or channels.",
                             weight=(self.max_length, self.channels or s.channels))
        held = self.max_length - self.offset
        if s.time is not None and s.time > held:
            raise self.error(SizeError, "in", f"expected at most {held} time steps, "
                             f"received {s}. Raise max_length.")
        return Spec.sequence(self.channels or s.channels, s.time)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _PositionEmbedding(self.max_length, self.channels or specs["in"].channels, self.name,
                                  self.offset, self.positions == "mask")


class _PositionEmbedding(nn.Module):
    def __init__(self, max_length, channels, name, first: int = 0, follow_mask: bool = False):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(max_length, channels) * 0.02)
        self.name = name
        self.first = first       # the row of position 0 (the layer's `offset`)
        self.follow_mask = follow_mask      # positions="mask"
        self.offset = 0          # first position of the next call: a stream moves it on

    @property
    def positions(self) -> int:
        """The positions it embeds: its rows from `first` on."""
        return self.weight.shape[0] - self.first

    def forward(self, x, masks=(None,)):
        b, t, _ = x.shape
        start = self.offset
        if self.follow_mask and masks[0] is not None and not start:    # a padded full pass
            return self._masked(x, masks[0])
        if start + t > self.positions:
            rows = f" (rows {self.first}… of {self.weight.shape[0]})" if self.first else ""
            raise DataError(f"layer '{self.name}': positions {start}…{start + t - 1} reach past "
                            f"max_length {self.positions}{rows}. Raise max_length or shorten "
                            "the sequences.")
        start += self.first
        return self.weight[start:start + t].unsqueeze(0).expand(b, t, -1)   # B×T×channels

    def _masked(self, x, mask):
        """Each step's row from its place among its sequence's real steps (< T, so within
        the table whenever T is)."""
        t = x.shape[1]
        if t > self.positions:
            return self.forward(x)                     # its error names the limit
        return F.embedding(mask_positions(mask) + self.first, self.weight)   # B×T×channels


class SinusoidalPositionEncoding(Layer):
    """Fixed sinusoidal position encoding [sinusoidalPositionEncodingLayer].

    PE[t, 2i] = sin(t / 10000^(2i/dim)), PE[t, 2i+1] = cos(t / 10000^(2i/dim)), t = 0…T−1.
    No learnables; only the input's length is read.

    Parameters
    ----------
    dim : int
        Channels of the encoding.

    Shape
    -----
    - `in`: B×T×C
    - `out`: B×T×dim
    """

    stem = "posenc"

    def __init__(self, dim: int, name: str | None = None):
        super().__init__(name)
        self.dim = check.integer(self, "dim", dim, example=64)

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BTC",), "SinusoidalPositionEncoding encodes time steps.")
        return Spec.sequence(self.dim, s.time)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _Sinusoidal(self.dim)


class _Sinusoidal(nn.Module):
    def __init__(self, dim):
        super().__init__()
        half = torch.arange(0, dim, 2, dtype=torch.float64)
        self.register_buffer("freq", torch.exp(-math.log(10000.0) * half / dim).float(),
                             persistent=False)
        self.dim = dim
        self.offset = 0

    def forward(self, x):
        b, t, _ = x.shape
        pos = torch.arange(self.offset, self.offset + t, device=x.device, dtype=self.freq.dtype)
        angles = pos.unsqueeze(1) * self.freq                                # T×ceil(dim/2)
        pe = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1)    # T×(2·ceil(dim/2))
        return pe[:, :self.dim].to(x.dtype).unsqueeze(0).expand(b, t, -1)    # B×T×dim


class RelativePositionBias(Layer):
    """T5's relative position bias: a learned score bias per head and relative-position bucket,
    for the `bias` input of attention layers (`has_bias_input=True`, with `scale=1.0` for T5).

    The bias of query i and key j is `weight[bucket(j − i), h]` for head h, the buckets those of
    transformers' `T5Attention._relative_position_bucket`: half of them exact for small
    distances, the rest logarithmic up to `max_distance` (farther keys share the last bucket);
    `bidirectional` (T5's encoder) gives keys after the query buckets of their own, a decoder
    (`bidirectional=False`) shares one bucket for them. Only the lengths of the inputs are read:
    connect the query and key sequences of the attention it feeds (the same sequence twice for
    self-attention). One layer may feed the `bias` port of many attention layers, as T5 shares
    the first layer's bias with the others.

    Parameters
    ----------
    num_heads : int
        Heads of the attention layers it feeds.
    num_buckets : int
        Relative-position buckets (T5: 32).
    max_distance : int
        Distances from here on share the last bucket (T5: 128).
    bidirectional : bool
        Separate buckets for keys after the query (an encoder); False for a causal decoder.

    Learnables: `weight`, num_buckets × num_heads (T5's `relative_attention_bias.weight`).

    Shape
    -----
    - `query`: B×Tq×C
    - `key`: B×Tk×C
    - `out`: B×num_heads×Tq×Tk (one H×Tq×Tk bias, broadcast over the batch)
    """

    stem = "relbias"
    input_ports = ("query", "key")

    def __init__(self, num_heads: int, num_buckets: int = 32, max_distance: int = 128,
                 bidirectional: bool = True, name: str | None = None):
        super().__init__(name)
        self.num_heads = check.integer(self, "num_heads", num_heads, example=8)
        self.bidirectional = check.flag(self, "bidirectional", bidirectional)
        least = 4 if self.bidirectional else 2
        self.num_buckets = check.integer(self, "num_buckets", num_buckets, least=least,
                                         example=32)
        exact = self.num_buckets // (4 if self.bidirectional else 2)
        self.max_distance = check.integer(self, "max_distance", max_distance, example=128)
        if self.max_distance <= exact:
            raise check.fail(self, "max_distance", f"more than the {exact} distances that "
                             f"'num_buckets'={self.num_buckets} keeps exact", max_distance,
                             f"Use max_distance > {exact}, or fewer num_buckets (T5: "
                             "num_buckets=32, max_distance=128).")

    def infer(self, specs: dict[str, Spec]) -> Spec:
        q, k = specs["query"], specs["key"]
        for port, s in (("query", q), ("key", k)):
            self.require(s, port, ("BTC",), "RelativePositionBias reads the lengths of the "
                         "query and key sequences of the attention it feeds.")
        check.learnables_fit(self, "query", "Use fewer num_buckets or num_heads.",
                             weight=(self.num_buckets, self.num_heads))
        return Spec("BHQK", (None, self.num_heads, q.time, k.time))

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return RelativePositionBiasModule(self.num_heads, self.num_buckets, self.max_distance,
                                          self.bidirectional)


class RelativePositionBiasModule(nn.Module):
    """`forward(query, key)` → B×H×Tq×Tk (a broadcast view); `bias(q_pos, k_pos)` → 1×H×Tq×Tk
    for any query and key positions (1-D tensors), which streaming calls."""

    def __init__(self, num_heads, num_buckets, max_distance, bidirectional):
        super().__init__()
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.bidirectional = bidirectional
        self.weight = nn.Parameter(torch.randn(num_buckets, num_heads) * 0.02)

    def bias(self, q_pos, k_pos):
        rel = relative_positions(q_pos, k_pos)                                 # Tq×Tk
        buckets = relative_position_bucket(rel, self.bidirectional, self.num_buckets,
                                           self.max_distance)
        return F.embedding(buckets, self.weight).permute(2, 0, 1).unsqueeze(0)  # 1×H×Tq×Tk

    def forward(self, query, key):
        b, tq, tk = query.shape[0], query.shape[1], key.shape[1]
        dev = self.weight.device
        out = self.bias(torch.arange(tq, device=dev), torch.arange(tk, device=dev))
        return out.expand(b, -1, -1, -1)                                       # B×H×Tq×Tk


class TokenPositionEmbedding(Layer):
    """Learned position embedding whose positions count the tokens that are not padding, as
    RoBERTa's (transformers' `create_position_ids_from_input_ids`).

    It reads the token ids, not a sequence of vectors: a token equal to `padding_idx` gets
    row `padding_idx`, any other the row `padding_idx + k`, k counting the tokens that are
    not `padding_idx` up to and including it. A sequence without padding tokens therefore takes
    rows padding_idx + 1, padding_idx + 2, …, left padding shifts nothing, and a padding
    token inside a sequence takes the padding row and is not counted. The ids alone decide,
    as in transformers (not the padding mask: a batch padded at its end leaves the rows of
    the valid steps as they are). Learnable `weight` (max_length×dim).

    Parameters
    ----------
    max_length : int
        The rows of the table (RoBERTa's `max_position_embeddings`, 514: 512 tokens after the
        rows up to `padding_idx`).
    dim : int
        Channels of the embedding.
    padding_idx : int
        The padding token's id, also the padding row (RoBERTa: 1).

    Shape
    -----
    - `in`: B×T token ids from a `TokenInput` (or B×T×1 from a `SequenceInput(1)`), with
      T ≤ max_length − padding_idx − 1
    - `out`: B×T×dim

    Examples
    --------
    >>> import torch, attnlab as al
    >>> from attnlab import layers as L
    >>> net = al.Network([L.TokenInput(), L.TokenPositionEmbedding(8, 2, padding_idx=1)])
    >>> with torch.no_grad():
    ...     _ = net.learnables["tokenposembed/weight"].copy_(torch.arange(16.).view(8, 2))
    >>> net(torch.tensor([[0, 5, 1, 7]]))[0, :, 0].tolist()    # rows 2, 3, 1 (padding), 4
    [4.0, 6.0, 2.0, 8.0]
    """

    stem = "tokenposembed"
    # the analysis refuses computed values here: ids come from an input layer
    reads_ids = ("in",)

    def __init__(self, max_length: int, dim: int, padding_idx: int, name: str | None = None):
        super().__init__(name)
        self.max_length = check.integer(self, "max_length", max_length, least=2, example=514)
        self.dim = check.integer(self, "dim", dim, example=768)
        self.padding_idx = check.integer(self, "padding_idx", padding_idx, least=0,
                                         most=self.max_length - 2, example=1)

    @property
    def most_steps(self) -> int:
        """The longest sequence of tokens that are not padding it embeds."""
        return self.max_length - self.padding_idx - 1

    def infer(self, specs: dict[str, Spec]) -> Spec:
        s = specs["in"]
        self.require(s, "in", ("BT", "BTC"), "TokenPositionEmbedding reads token ids.")
        if s.labels == "BTC":
            self.require_channels(s, "in", 1, "Token ids come as one channel: SequenceInput(1).")
        check.learnables_fit(self, "in", "Use a smaller max_length or dim.",
                             weight=(self.max_length, self.dim))
        if s.time is not None and s.time > self.most_steps:
            raise self.error(SizeError, "in", f"expected at most {self.most_steps} time steps "
                             f"(max_length {self.max_length} rows, positions from padding_idx "
                             f"{self.padding_idx} + 1), received {s}. Raise max_length or "
                             "shorten the sequences.")
        return Spec.sequence(self.dim, s.time)

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return _TokenPositionEmbedding(self.max_length, self.dim, self.padding_idx, self.name)


class _TokenPositionEmbedding(nn.Module):
    def __init__(self, max_length, dim, padding_idx, name):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(max_length, dim) * 0.02)
        self.padding_idx = padding_idx
        self.name = name

    def positions(self, ids):
        """The rows of each step (B×T int64), as transformers counts them."""
        if ids.dim() == 3:
            ids = ids.squeeze(-1)                                  # B×T×1 → B×T
        counted = (ids != self.padding_idx).int()
        return (torch.cumsum(counted, dim=1).type_as(counted) * counted).long() + self.padding_idx

    def forward(self, ids):
        rows = self.positions(ids)
        # only a sequence this long can reach past the table: the host reads the largest row
        # then, never on the common path
        if ids.shape[1] + self.padding_idx >= self.weight.shape[0]:
            top = int(rows.max())
            if top >= self.weight.shape[0]:
                raise DataError(f"layer '{self.name}': position {top} reaches past the "
                                f"{self.weight.shape[0]} rows of the table (max_length): at most "
                                f"{self.weight.shape[0] - self.padding_idx - 1} tokens that are "
                                f"not padding (id {self.padding_idx}) per sequence. Shorten the "
                                "sequences.")
        return F.embedding(rows, self.weight)                          # B×T×dim
