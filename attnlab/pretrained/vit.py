"""ViT (`model_type` "vit"): `ViTForImageClassification` and the base `ViTModel`.

The graph: the image's patches embedded (`PatchEmbedding`, a convolution of kernel and stride
`patch_size`, patches row by row), the class token prepended, position embeddings added;
`num_hidden_layers` pre-norm blocks (LayerNorm → SelfAttention → residual, LayerNorm → Dense →
activation → Dense → residual); a final LayerNorm; then the classifier on the class token
(or, for the base model, the pooler). Input `pixel_values` B×C×H×W at the config's
`image_size` (position embeddings are not interpolated to other sizes).
"""
from __future__ import annotations

from .builder import Family, Names, divisor
from .config import Config, keys
from .weights import W

# checkpoint tensor (after "encoder.layer.{i}.")   learnable(s) (after "encoder.layer.{i}.")
BLOCK = [
    W("layernorm_before.weight",                "layernorm_before/weight"),
    W("layernorm_before.bias",                  "layernorm_before/bias"),
    W("attention.attention.query.weight",       "attention.attention/query.weight"),
    W("attention.attention.query.bias",         "attention.attention/query.bias"),
    W("attention.attention.key.weight",         "attention.attention/key.weight"),
    W("attention.attention.key.bias",           "attention.attention/key.bias"),
    W("attention.attention.value.weight",       "attention.attention/value.weight"),
    W("attention.attention.value.bias",         "attention.attention/value.bias"),
    W("attention.output.dense.weight",          "attention.attention/output.weight"),
    W("attention.output.dense.bias",            "attention.attention/output.bias"),
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



def patches(cfg: Config) -> tuple[int, tuple[int, int], tuple[int, int]]:
    """(channels, image size, patch size), the patches fitting the image."""
    (h, w), (ph, pw) = cfg.pair("image_size", 224), cfg.pair("patch_size", 16)
    if h % ph or w % pw:
        raise cfg.bad("patch_size", [ph, pw], f"a divisor of image_size ({h}×{w})")
    return cfg.int("num_channels", 3), (h, w), (ph, pw)


def positions(cfg: Config) -> int:
    """The patches and the class token."""
    _, (h, w), (ph, pw) = patches(cfg)
    return (h // ph) * (w // pw) + 1


FAMILY = Family(
    architectures=("ViTForImageClassification", "ViTModel"),
    keys=keys(
        read="hidden_size num_hidden_layers num_attention_heads intermediate_size hidden_act "
             "hidden_dropout_prob attention_probs_dropout_prob layer_norm_eps image_size "
             "patch_size num_channels qkv_bias pooler_output_size pooler_act",
        # a query, key and value without biases but an output projection with one: not built
        fixed={"qkv_bias": (True,)},
        ignored="encoder_stride"),          # ViTForMaskedImageModeling's decoder only
    heads={"ViTForImageClassification": "first-classifier", "ViTModel": "pooled"},
    block_table=lambda c: BLOCK,
    embedding_table=lambda c: EMBEDDINGS,
    blocks=lambda c: c.int("num_hidden_layers"),
    width=lambda c: c.int("hidden_size"),
    num_heads=lambda c: divisor(c, "num_attention_heads", c.int("hidden_size"), "hidden_size"),
    inner=lambda c: c.int("intermediate_size"),
    norm="layer", eps=lambda c: c.float("layer_norm_eps", 1e-12), causal=False,
    attention_bias=True,
    attention_dropout=lambda c: c.probability("attention_probs_dropout_prob", 0.0),
    ffn="mlp", activation=("hidden_act", "gelu"), mlp_bias=True,
    residual_dropout=lambda c: c.probability("hidden_dropout_prob", 0.0),
    patches=patches, positions=positions,
    embedding_dropout=lambda c: c.probability("hidden_dropout_prob", 0.0),
    classifier_bias=True,
    pooler_width=lambda c: c.int("pooler_output_size", c.int("hidden_size")),
    pooler_activation=("pooler_act", "tanh"),
    prefix="vit.", cross_prefix=True,
    names=Names(embeddings="embeddings.add", embeddings_dropout="embeddings.dropout",
                positions="embeddings.position_embeddings", block="encoder.layer.{i}",
                norm_1="layernorm_before", attention="attention.attention",
                attention_dropout="attention.output.dropout", add_1="attention.add",
                norm_2="layernorm_after", up="intermediate.dense", act="intermediate.act",
                down="output.dense", mlp_dropout="output.dropout", add_2="add",
                final_norm="layernorm", classifier="classifier"),
)
