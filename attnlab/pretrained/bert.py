"""BERT (`model_type` "bert"): `BertModel`, `BertForMaskedLM`, `BertForSequenceClassification`,
`BertForTokenClassification` and `BertForQuestionAnswering` (`start_logits`, `end_logits`).

The graph: word, position and token-type embeddings added, LayerNorm; `num_hidden_layers`
post-norm blocks (SelfAttention → residual → LayerNorm, Dense → activation → Dense →
residual → LayerNorm); then the model's head. Inputs `input_ids` and `token_type_ids` (B×T
ids; padding, from a list of id sequences or `al.Padded`, plays `attention_mask`). Layers are
named after the checkpoint's modules (`encoder.layer.0.attention`, `pooler.dense`).
"""
from __future__ import annotations

from .builder import Family, Names, divisor
from .config import Config, keys
from .weights import W

# checkpoint tensor (after "encoder.layer.{i}.")   learnable(s) (after "encoder.layer.{i}.")
BLOCK = [
    W("attention.self.query.weight",            "attention.self/query.weight"),
    W("attention.self.query.bias",              "attention.self/query.bias"),
    W("attention.self.key.weight",              "attention.self/key.weight"),
    W("attention.self.key.bias",                "attention.self/key.bias"),
    W("attention.self.value.weight",            "attention.self/value.weight"),
    W("attention.self.value.bias",              "attention.self/value.bias"),
    W("attention.output.dense.weight",          "attention.self/output.weight"),
    W("attention.output.dense.bias",            "attention.self/output.bias"),
    W("attention.output.LayerNorm.weight",      "attention.output.LayerNorm/weight"),
    W("attention.output.LayerNorm.bias",        "attention.output.LayerNorm/bias"),
    W("intermediate.dense.weight",              "intermediate.dense/weight"),
    W("intermediate.dense.bias",                "intermediate.dense/bias"),
    W("output.dense.weight",                    "output.dense/weight"),
    W("output.dense.bias",                      "output.dense/bias"),
    W("output.LayerNorm.weight",                "output.LayerNorm/weight"),
    W("output.LayerNorm.bias",                  "output.LayerNorm/bias"),
]


def classifier_dropout(cfg: Config) -> float:
    """`classifier_dropout`, else `hidden_dropout_prob`, as in transformers."""
    if cfg.get("classifier_dropout", None) is None:
        return cfg.probability("hidden_dropout_prob", 0.1)
    return cfg.probability("classifier_dropout")


FAMILY = Family(
    architectures=("BertForMaskedLM", "BertForSequenceClassification",
                   "BertForTokenClassification", "BertForQuestionAnswering", "BertModel"),
    keys=keys(
        read="vocab_size hidden_size num_hidden_layers num_attention_heads intermediate_size "
             "hidden_act hidden_dropout_prob attention_probs_dropout_prob "
             "max_position_embeddings type_vocab_size layer_norm_eps classifier_dropout "
             "tie_word_embeddings",
        fixed={"position_embedding_type": ("absolute",)},
        # keys of Google's original BERT configs and older transformers that no model reads
        ignored="directionality pooler_fc_size pooler_num_attention_heads "
                "pooler_num_fc_layers pooler_size_per_head pooler_type output_past"),
    heads={"BertForMaskedLM": "masked-lm", "BertForSequenceClassification": "pooled-classifier",
           "BertForTokenClassification": "token-classifier",
           "BertForQuestionAnswering": "span", "BertModel": "pooled"},
    block_table=lambda c: BLOCK,
    blocks=lambda c: c.int("num_hidden_layers"),
    width=lambda c: c.int("hidden_size"),
    num_heads=lambda c: divisor(c, "num_attention_heads", c.int("hidden_size"), "hidden_size"),
    vocab=lambda c: c.int("vocab_size"),
    inner=lambda c: c.int("intermediate_size"),
    norm="layer", eps=lambda c: c.float("layer_norm_eps", 1e-12), placement="post",
    causal=False, attention_bias=True,
    attention_dropout=lambda c: c.probability("attention_probs_dropout_prob", 0.1),
    ffn="mlp", activation=("hidden_act", "gelu"), mlp_bias=True,
    residual_dropout=lambda c: c.probability("hidden_dropout_prob", 0.1),
    positions=lambda c: c.int("max_position_embeddings"),
    token_types=lambda c: c.int("type_vocab_size", 2),
    embedding_norm=True, final_norm=False,
    embedding_dropout=lambda c: c.probability("hidden_dropout_prob", 0.1),
    classifier_bias=True, classifier_dropout=classifier_dropout,
    tied=lambda c: c.flag("tie_word_embeddings", True),
    prefix="bert.", cross_prefix=True,
    ignored_tensors=("embeddings.position_ids",),      # a buffer 4.x files hold
    names=Names(tokens="embeddings.word_embeddings", positions="embeddings.position_embeddings",
                token_types="embeddings.token_type_embeddings", embeddings="embeddings.add",
                embeddings_dropout="embeddings.dropout", block="encoder.layer.{i}",
                attention="attention.self", attention_dropout="attention.output.dropout",
                add_1="attention.output.add", norm_1="attention.output.LayerNorm",
                up="intermediate.dense", act="intermediate.act", down="output.dense",
                mlp_dropout="output.dropout", add_2="output.add", norm_2="output.LayerNorm",
                classifier="classifier"),
)
