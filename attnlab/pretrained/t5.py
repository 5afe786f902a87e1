"""T5 (`model_type` "t5"): `T5ForConditionalGeneration`, the encoder–decoder.

The graph, layers named after the checkpoint's modules:

- `shared`: the token embedding both stacks read (the decoder's `decoder.embed_tokens` shares
  its weight);
- the encoder, `num_layers` pre-norm blocks: T5's layer norm (an RMSNorm: no mean subtracted,
  no bias) → SelfAttention (no projection biases, scale 1.0, the bucketed relative position
  bias added to the scores) → residual; norm → feed-forward → residual; a final norm;
- the decoder, `num_decoder_layers` blocks: norm → causal SelfAttention with the
  unidirectional relative bias → residual; norm → cross-attention (MultiHeadAttention over
  the encoder's output, no position bias) → residual; norm → feed-forward → residual; a final
  norm, then `lm_head` (scaled by d_model**-0.5 first when the config asks for it, as T5's
  tied head does).

The relative position bias is learned by the first block's attention only (the tensor
`…block.0.layer.0.SelfAttention.relative_attention_bias`; the `RelativePositionBias` layer
`…block.0.layer.0.relative_attention_bias`, beside the attention layer, whose module cannot
hold it) and feeds the `bias` port of every self-attention of its stack. The feed-forward is
`feed_forward_proj`: "relu" (Dense `wi` → ReLU → Dense `wo`) or "gated-gelu" (GLU `wi` with
GELU(tanh), its `gate` `wi_0` and `up` `wi_1`, → Dense `wo`), and the other activations
transformers accepts there that attnlab computes.

Inputs `input_ids` (the encoder's) and `decoder_input_ids`, output `logits`. Streaming and
`al.generate` take the encoder input whole: ``al.generate(net, static_inputs={"input_ids":
ids}, start=decoder_start_token_id, …)``.
"""
from __future__ import annotations

from pathlib import Path

import torch

from .. import layers as L
from ..graph import format_port
from ..layers.base import Layer
from ..network import Network
from .common import ACTIVATIONS, output, residual, under
from .config import CONFIG_FILE, CheckpointError, Config, keys
from .checkpoint import Checkpoint
from .weights import W, Weight

ARCHITECTURES = ("T5ForConditionalGeneration",)

KEYS = keys(
    read="vocab_size d_model d_kv d_ff num_layers num_decoder_layers num_heads "
         "relative_attention_num_buckets relative_attention_max_distance dropout_rate "
         "layer_norm_epsilon feed_forward_proj tie_word_embeddings scale_decoder_outputs",
    fixed={"is_encoder_decoder": (True,), "is_decoder": (False,)},
    # dense_act_fn and is_gated_act are what feed_forward_proj says, written out;
    # classifier_dropout is for the classification heads, n_positions and output_past are
    # bookkeeping of older configs (relative positions have no learned length)
    ignored="dense_act_fn is_gated_act classifier_dropout n_positions output_past",
)

IGNORED_TENSORS: tuple[str, ...] = ()

# feed_forward_proj's activation → (the activation layer's transformers name, GLU's name)
FEED_FORWARD = {"relu": ("relu", "relu"), "gelu": ("gelu", "gelu"),
                "gelu_new": ("gelu_new", "gelu-tanh"), "silu": ("silu", "silu")}

# checkpoint tensor (after "….layer.{j}.")   learnable (after "….layer.{j}."), for one
# attention sublayer named NAME (SelfAttention or EncDecAttention)
SUBLAYER = [
    W("NAME.q.weight",                     "NAME/query.weight"),
    W("NAME.k.weight",                     "NAME/key.weight"),
    W("NAME.v.weight",                     "NAME/value.weight"),
    W("NAME.o.weight",                     "NAME/output.weight"),
    W("layer_norm.weight",                 "layer_norm/weight"),
]


def _sublayer(attention: str) -> list[Weight]:
    return [Weight(w.name.replace("NAME", attention),
                   tuple(n.replace("NAME", attention) for n in w.learnables)) for w in SUBLAYER]


def _feed_forward(cfg: Config) -> tuple[bool, str]:
    """(gated, activation name as transformers spells it) from `feed_forward_proj`."""
    proj = cfg.get("feed_forward_proj", "relu")
    parts = proj.split("-") if isinstance(proj, str) else []
    gated = len(parts) == 2 and parts[0] == "gated"
    act = parts[-1] if parts and len(parts) <= 2 and (gated or len(parts) == 1) else None
    if gated and act == "gelu":
        act = "gelu_new"                  # transformers' "gated-gelu" is the tanh GELU
    if act not in FEED_FORWARD:
        raise cfg.unsupported("feed_forward_proj", proj, "supported: \"relu\", \"gelu\", "
                              "\"silu\", \"gated-gelu\" (GELU tanh), \"gated-relu\", "
                              "\"gated-silu\"")
    return gated, act


def _scaled_head(cfg: Config) -> bool:
    """Whether the decoder's output is scaled by d_model**-0.5 before `lm_head`: 5.x writes
    `scale_decoder_outputs`; 4.x scales when the head is tied (`tie_word_embeddings`)."""
    if "scale_decoder_outputs" in cfg.data:
        return cfg.flag("scale_decoder_outputs", True)
    return cfg.flag("tie_word_embeddings", True)


def _own_head(cfg: Config) -> bool:
    """Whether `lm_head` has its own weight: a 4.x config with `tie_word_embeddings` false, or
    a file holding an `lm_head.weight` that differs from `shared.weight` (transformers then
    keeps them apart)."""
    if not cfg.flag("tie_word_embeddings", True):
        return True
    folder = Path(cfg.where).parent
    if Path(cfg.where).name != CONFIG_FILE or not folder.is_dir():
        return False
    try:
        with Checkpoint(folder) as ckpt:
            if "lm_head.weight" not in ckpt.header or "shared.weight" not in ckpt.header:
                return False
            if ckpt.header["lm_head.weight"][0] != ckpt.header["shared.weight"][0]:
                return True               # the loader names both shapes
            return not torch.equal(ckpt.tensor("lm_head.weight"), ckpt.tensor("shared.weight"))
    except CheckpointError:
        return False                      # the loader reports the folder's problem itself


def weights(cfg: Config, architecture: str) -> list[Weight]:
    gated = _feed_forward(cfg)[0]
    ff = ([W("DenseReluDense.wi_0.weight", "DenseReluDense.wi/gate.weight"),
           W("DenseReluDense.wi_1.weight", "DenseReluDense.wi/up.weight")] if gated else
          [W("DenseReluDense.wi.weight", "DenseReluDense.wi/weight")]) + \
        [W("DenseReluDense.wo.weight", "DenseReluDense.wo/weight")]
    table = [W("shared.weight", "shared/weight"),
             W("encoder.embed_tokens.weight", "shared/weight", tied=True),
             W("decoder.embed_tokens.weight", "shared/weight", tied=True)]
    for stack, n, parts in (("encoder", cfg.int("num_layers"), ("SelfAttention",)),
                            ("decoder", _decoder_layers(cfg), ("SelfAttention",
                                                               "EncDecAttention"))):
        for i in range(n):
            b = f"{stack}.block.{i}."
            for j, att in enumerate(parts):
                table += under(_sublayer(att), f"{b}layer.{j}.", f"{b}layer.{j}.")
            j = len(parts)
            table += under(ff, f"{b}layer.{j}.", f"{b}layer.{j}.")
            table.append(W(f"{b}layer.{j}.layer_norm.weight", f"{b}layer.{j}.layer_norm/weight"))
        bias = f"{stack}.block.0.layer.0."           # the tensor is in SelfAttention, the layer beside it
        table.append(W(f"{bias}SelfAttention.relative_attention_bias.weight",
                       f"{bias}relative_attention_bias/weight"))
        table.append(W(f"{stack}.final_layer_norm.weight", f"{stack}.final_layer_norm/weight"))
    table.append(W("lm_head.weight", "lm_head/weight", tied=not _own_head(cfg)))
    return table


def _decoder_layers(cfg: Config) -> int:
    return cfg.int("num_decoder_layers", cfg.int("num_layers"))


class _Builder:
    """Adds T5's layers to one network."""

    def __init__(self, cfg: Config, net: Network):
        self.net = net
        self.d = cfg.int("d_model")
        self.heads = cfg.int("num_heads")
        self.inner = self.heads * cfg.int("d_kv")
        self.d_ff = cfg.int("d_ff")
        self.eps = cfg.float("layer_norm_epsilon", 1e-6)
        self.p = cfg.probability("dropout_rate", 0.1)
        self.buckets = cfg.int("relative_attention_num_buckets", 32)
        self.distance = cfg.int("relative_attention_max_distance", 128)
        self.gated, self.act = _feed_forward(cfg)

    def add(self, layer: Layer, source: str, port: str | None = None) -> str:
        self.net.add(layer)
        self.net.connect(source, layer.name if port is None else format_port(layer.name, port))
        return layer.name

    def dropout(self, x: str, name: str) -> str:
        return x if self.p == 0 else self.add(L.Dropout(self.p, name=name), x)

    def residual(self, skip: str, x: str, name: str) -> str:
        return residual(self.net, skip, x, name)

    def norm(self, x: str, name: str) -> str:
        return self.add(L.RMSNorm(self.eps, name=name), x)

    def self_attention(self, x: str, name: str, bias: str, causal: bool) -> str:
        """Norm → SelfAttention (+ the stack's relative bias) → dropout → residual."""
        h = self.norm(x, f"{name}.layer_norm")
        att = f"{name}.SelfAttention"
        self.add(L.SelfAttention(self.heads, self.inner, output_channels=self.d, scale=1.0,
                                 attention_mask="causal" if causal else None, dropout=self.p,
                                 projection_bias=False, has_bias_input=True, name=att), h, "in")
        self.net.connect(bias, f"{att}/bias")
        return self.residual(x, self.dropout(att, f"{name}.dropout"), f"{name}.add")

    def cross_attention(self, x: str, memory: str, name: str) -> str:
        h = self.norm(x, f"{name}.layer_norm")
        att = f"{name}.EncDecAttention"
        self.add(L.MultiHeadAttention(self.heads, self.inner, output_channels=self.d,
                                      scale=1.0, dropout=self.p, projection_bias=False,
                                      name=att), h, "query")
        self.net.connect(memory, f"{att}/key").connect(memory, f"{att}/value")
        return self.residual(x, self.dropout(att, f"{name}.dropout"), f"{name}.add")

    def feed_forward(self, x: str, name: str) -> str:
        h = self.norm(x, f"{name}.layer_norm")
        ff = f"{name}.DenseReluDense"
        if self.gated:
            h = self.add(L.GLU(self.d_ff, activation=FEED_FORWARD[self.act][1], bias=False,
                               name=f"{ff}.wi"), h)             # wi_0 (gate) and wi_1 (up)
        else:
            h = self.add(L.Dense(self.d_ff, bias=False, name=f"{ff}.wi"), h)
            h = self.add(ACTIVATIONS[FEED_FORWARD[self.act][0]](f"{ff}.act"), h)
        h = self.dropout(h, f"{ff}.dropout")
        h = self.add(L.Dense(self.d, bias=False, name=f"{ff}.wo"), h)
        return self.residual(x, self.dropout(h, f"{name}.dropout"), f"{name}.add")

    def bias(self, x: str, stack: str, bidirectional: bool) -> str:
        name = f"{stack}.block.0.layer.0.relative_attention_bias"
        self.add(L.RelativePositionBias(self.heads, self.buckets, self.distance,
                                        bidirectional=bidirectional, name=name), x, "query")
        self.net.connect(x, f"{name}/key")
        return name

    def stack(self, x: str, stack: str, layers: int, memory: str | None = None) -> str:
        x = self.dropout(x, f"{stack}.dropout")
        bias = self.bias(x, stack, bidirectional=memory is None)
        for i in range(layers):
            b = f"{stack}.block.{i}.layer"
            x = self.self_attention(x, f"{b}.0", bias, causal=memory is not None)
            if memory is not None:
                x = self.cross_attention(x, memory, f"{b}.1")
            x = self.feed_forward(x, f"{b}.{2 if memory is not None else 1}")
        x = self.norm(x, f"{stack}.final_layer_norm")
        return self.dropout(x, f"{stack}.final_dropout")


def network(cfg: Config, architecture: str) -> Network:
    vocab = cfg.int("vocab_size")
    b = _Builder(cfg, Network())
    net = b.net
    net.add([L.TokenInput(name="input_ids"), L.Embedding(vocab, b.d, name="shared")])
    net.add([L.TokenInput(name="decoder_input_ids"),
             L.Embedding(vocab, b.d, tied_to="shared", name="decoder.embed_tokens")])
    memory = b.stack("shared", "encoder", cfg.int("num_layers"))
    x = b.stack("decoder.embed_tokens", "decoder", _decoder_layers(cfg), memory)
    if _scaled_head(cfg):
        x = b.add(L.Scaling(b.d ** -0.5, name="scale_decoder_outputs"), x)
    own = _own_head(cfg)
    b.add(L.Dense(vocab, bias=False, tied_to=None if own else "shared", name="lm_head"), x)
    b.add(output("logits"), "lm_head")
    return net
