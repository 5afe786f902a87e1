"""ViT (`model_type` "vit"): `ViTForImageClassification` and the base `ViTModel`.

The graph: the image's patches embedded (`PatchEmbedding`, a convolution of kernel and stride
`patch_size`, patches row by row), the class token prepended, position embeddings added;
`num_hidden_layers` pre-norm blocks (LayerNorm → SelfAttention → residual, LayerNorm → Dense →
activation → Dense → residual); a final LayerNorm; then the classifier on the class token
(or, for the base model, the pooler). Input `pixel_values` B×C×H×W at the config's
`image_size` (position embeddings are not interpolated to other sizes).
"""
from __future__ import annotations

from .. import layers as L
from ..network import Network
from .common import activation, dropout, output, residual, under
from .config import Config, keys
from .weights import W, Weight

ARCHITECTURES = ("ViTForImageClassification", "ViTModel")

KEYS = keys(
    read="hidden_size num_hidden_layers num_attention_heads intermediate_size hidden_act "
         "hidden_dropout_prob attention_probs_dropout_prob layer_norm_eps image_size patch_size "
         "num_channels qkv_bias pooler_output_size pooler_act",
    # a query, key and value without biases but an output projection with one: not built yet
    fixed={"qkv_bias": (True,)},
    ignored="encoder_stride",            # ViTForMaskedImageModeling's decoder only
)

# where the base model's tensors sit in a head model's file
PREFIX = "vit."

IGNORED_TENSORS = ()

# checkpoint tensor (after "encoder.layer.{i}.")   learnable(s) (after "encoder.layer.{i}.")
BLOCK = [
    W("layernorm_before.weight",                "layernorm_before/weight"),
    W("layernorm_before.bias",                  "layernorm_before/bias"),
    W("attention.attention.query.weight",       "attention/query.weight"),
    W("attention.attention.query.bias",         "attention/query.bias"),
    W("attention.attention.key.weight",         "attention/key.weight"),
    W("attention.attention.key.bias",           "attention/key.bias"),
    W("attention.attention.value.weight",       "attention/value.weight"),
    W("attention.attention.value.bias",         "attention/value.bias"),
    W("attention.output.dense.weight",          "attention/output.weight"),
    W("attention.output.dense.bias",            "attention/output.bias"),
    W("layernorm_after.weight",                 "layernorm_after/weight"),
    W("layernorm_after.bias",                   "layernorm_after/bias"),
    W("intermediate.dense.weight",              "intermediate.dense/weight"),
    W("intermediate.dense.bias",                "intermediate.dense/bias"),
    W("output.dense.weight",                    "output.dense/weight"),
    W("output.dense.bias",                      "output.dense/bias"),
]

EMBEDDINGS = [
    W("embeddings.cls_token",                   "embeddings.cls_token/weight", reshape=True),
    W("embeddings.patch_embeddings.projection.weight", "embeddings.patch_embeddings/weight"),
    W("embeddings.patch_embeddings.projection.bias", "embeddings.patch_embeddings/bias"),
    W("embeddings.position_embeddings",         "embeddings.position_embeddings/weight",
      reshape=True),
]


def weights(cfg: Config, architecture: str) -> list[Weight]:
    base = "vit." if architecture == "ViTForImageClassification" else ""
    table = under(EMBEDDINGS, base, "")
    for i in range(cfg.int("num_hidden_layers")):
        table += under(BLOCK, f"{base}encoder.layer.{i}.", f"encoder.layer.{i}.")
    table += [W(f"{base}layernorm.weight", "layernorm/weight"),
              W(f"{base}layernorm.bias", "layernorm/bias")]
    if architecture == "ViTModel":
        table += [W("pooler.dense.weight", "pooler.dense/weight"),
                  W("pooler.dense.bias", "pooler.dense/bias")]
    else:
        table += [W("classifier.weight", "classifier/weight"),
                  W("classifier.bias", "classifier/bias")]
    return table


def network(cfg: Config, architecture: str) -> Network:
    c, heads = cfg.int("hidden_size"), cfg.int("num_attention_heads")
    eps, drop = cfg.float("layer_norm_eps", 1e-12), cfg.probability("hidden_dropout_prob", 0.0)
    (h, w), (ph, pw) = cfg.pair("image_size", 224), cfg.pair("patch_size", 16)
    if c % heads:
        raise cfg.bad("num_attention_heads", heads, f"a divisor of hidden_size ({c})")
    if h % ph or w % pw:
        raise cfg.bad("patch_size", [ph, pw], f"a divisor of image_size ({h}×{w})")

    e = "embeddings"
    net = Network([L.ImageInput((cfg.int("num_channels", 3), h, w), name="pixel_values"),
                   L.PatchEmbedding((ph, pw), c, flatten_mode="row-major",
                                    name=f"{e}.patch_embeddings"),
                   L.EmbeddingConcatenation(name=f"{e}.cls_token")])
    net.add(L.PositionEmbedding((h // ph) * (w // pw) + 1, name=f"{e}.position_embeddings"))
    net.connect(f"{e}.cls_token", f"{e}.position_embeddings")
    x = dropout(net, residual(net, f"{e}.cls_token", f"{e}.position_embeddings", f"{e}.add"), drop,
                f"{e}.dropout")
    for i in range(cfg.int("num_hidden_layers")):
        b = f"encoder.layer.{i}"
        net.add([L.LayerNorm(eps, name=f"{b}.layernorm_before"),
                 L.SelfAttention(heads, c, dropout=cfg.probability("attention_probs_dropout_prob", 0.0),
                                 name=f"{b}.attention")])
        net.connect(x, f"{b}.layernorm_before")
        x = residual(net, x, dropout(net, f"{b}.attention", drop, f"{b}.attention.output.dropout"),
                f"{b}.attention.add")
        net.add([L.LayerNorm(eps, name=f"{b}.layernorm_after"),
                 L.Dense(cfg.int("intermediate_size"), name=f"{b}.intermediate.dense"),
                 activation(cfg, "hidden_act", f"{b}.intermediate.act", "gelu"),
                 L.Dense(c, name=f"{b}.output.dense")])
        net.connect(x, f"{b}.layernorm_after")
        x = residual(net, x, dropout(net, f"{b}.output.dense", drop, f"{b}.output.dropout"), f"{b}.add")
    net.add(L.LayerNorm(eps, name="layernorm"))
    net.connect(x, "layernorm")
    if architecture == "ViTModel":
        net.add(output("last_hidden_state")).connect("layernorm", "last_hidden_state")
        net.add([L.Index1d("first", name="pooler.first"),
                 L.Dense(cfg.int("pooler_output_size", c), name="pooler.dense"),
                 activation(cfg, "pooler_act", "pooler.activation", "tanh"),
                 output("pooler_output")])
        net.connect("layernorm", "pooler.first")
    else:
        net.add([L.Index1d("first", name="cls"), L.Dense(cfg.num_labels(), name="classifier"),
                 output("logits")])
        net.connect("layernorm", "cls")
    return net
