"""OPT (`model_type` "opt"; Meta's OPT-125m … OPT-66b): `OPTForCausalLM` and the base `OPTModel`.

Token embeddings plus learned positions, whose table starts two rows before position 0 (OPT's
offset 2: position p is row p + 2, `PositionEmbedding(offset=2)`); blocks of causal
SelfAttention with biases and a Dense → ReLU → Dense feed-forward (`ffn_dim`), LayerNorm before
each sublayer (`do_layer_norm_before`, most OPT models) or after each residual (OPT-350m), a final
LayerNorm with pre-norm blocks, and the output projection tied to the token embedding. Where
`word_embed_proj_dim` differs from `hidden_size` (OPT-350m: 512 and 1024) the token embedding is
that narrower width, `project_in` widens it before the positions are added and `project_out`
narrows the blocks' output again before the head (and in the base model's
`last_hidden_state`). `enable_bias` false drops every projection's bias.

Refused by name: `layer_norm_elementwise_affine` false (norms without learnables) and a
`layerdrop` other than 0 (blocks skipped at random in training).
"""
from __future__ import annotations

from .builder import Family, Names, divisor
from .config import Config, keys
from .saving import Sayable
from .weights import W, Weight

ATTENTION = [
    W("self_attn.q_proj.weight",            "self_attn/query.weight"),
    W("self_attn.k_proj.weight",            "self_attn/key.weight"),
    W("self_attn.v_proj.weight",            "self_attn/value.weight"),
    W("self_attn.out_proj.weight",          "self_attn/output.weight"),
]
FFN = [
    W("fc1.weight",                         "fc1/weight"),
    W("fc2.weight",                         "fc2/weight"),
]
NORMS = [
    W("self_attn_layer_norm.weight",        "self_attn_layer_norm/weight"),
    W("self_attn_layer_norm.bias",          "self_attn_layer_norm/bias"),
    W("final_layer_norm.weight",            "final_layer_norm/weight"),
    W("final_layer_norm.bias",              "final_layer_norm/bias"),
]


def biases(rows: list[Weight]) -> list[Weight]:
    return [W(w.name.removesuffix("weight") + "bias",
              *(n.removesuffix("weight") + "bias" for n in w.learnables)) for w in rows]


def block_table(cfg: Config) -> list[Weight]:
    rows = ATTENTION + FFN + NORMS
    return rows + biases(ATTENTION + FFN) if cfg.flag("enable_bias", True) else rows


def pre_norm(cfg: Config) -> bool:
    return cfg.flag("do_layer_norm_before", True)


SAYABLE = Sayable(
    blocks=(("num_hidden_layers", r"^decoder\.layers\.(\d+)\.", None),),
    vocab=("vocab_size", "decoder.embed_tokens"), head=("lm_head", "decoder.embed_tokens"),
    hints=((r"\.activation_fn$", "", "activation_function"),
           (r"\.self_attn$", "dropout", "attention_dropout"), (r"dropout$", "p", "dropout"),
           (r"^decoder\.embed_positions$", "max_length", "max_position_embeddings"),
           (r"\.fc1$", "out", "ffn_dim")))


FAMILY = Family(
    architectures=("OPTForCausalLM", "OPTModel"),
    keys=keys(
        read="vocab_size hidden_size num_hidden_layers num_attention_heads ffn_dim "
             "max_position_embeddings do_layer_norm_before _remove_final_layer_norm "
             "word_embed_proj_dim dropout attention_dropout activation_function enable_bias "
             "tie_word_embeddings",
        fixed={"layer_norm_elementwise_affine": (True,), "layerdrop": (0.0, 0)},
        # init_std: the random initialisation's; activation_dropout: written by early
        # transformers, read by no OPT model of transformers 5
        ignored="init_std activation_dropout"),
    heads={"OPTForCausalLM": "lm", "OPTModel": "hidden"},
    block_table=block_table,
    blocks=lambda c: c.int("num_hidden_layers"),
    width=lambda c: c.int("hidden_size"),
    num_heads=lambda c: divisor(c, "num_attention_heads", c.int("hidden_size"), "hidden_size"),
    vocab=lambda c: c.int("vocab_size"),
    inner=lambda c: c.int("ffn_dim"),
    norm="layer", eps=1e-5,                  # nn.LayerNorm's default: OPT's config has none
    placement=lambda c: "pre" if pre_norm(c) else "post",
    final_norm=lambda c: pre_norm(c) and not c.flag("_remove_final_layer_norm", False),
    attention_bias=lambda c: c.flag("enable_bias", True),
    attention_dropout=lambda c: c.probability("attention_dropout", 0.0),
    ffn="mlp", activation=("activation_function", "relu"),
    mlp_bias=lambda c: c.flag("enable_bias", True),
    residual_dropout=lambda c: c.probability("dropout", 0.1),
    positions=lambda c: c.int("max_position_embeddings"),
    position_offset=2,
    embedding_width=lambda c: c.int("word_embed_proj_dim", c.int("hidden_size")),
    tied=lambda c: c.flag("tie_word_embeddings", True),
    prefix="model.",
    names=Names(tokens="decoder.embed_tokens", positions="decoder.embed_positions",
                embeddings="decoder.embed", project_in="decoder.project_in",
                project_out="decoder.project_out", block="decoder.layers.{i}",
                norm_1="self_attn_layer_norm", attention="self_attn",
                attention_dropout="self_attn_dropout", norm_2="final_layer_norm", up="fc1",
                act="activation_fn", down="fc2", mlp_dropout="fc2_dropout",
                final_norm="decoder.final_layer_norm"),
    sayable=SAYABLE,
)
