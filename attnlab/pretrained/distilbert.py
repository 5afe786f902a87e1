"""DistilBERT (`model_type` "distilbert"): `DistilBertModel`, `DistilBertForMaskedLM` (what
the Hub's checkpoints are saved as) and the heads people fine-tune,
`DistilBertForSequenceClassification`, `DistilBertForTokenClassification` and
`DistilBertForQuestionAnswering`.

The graph: word and position embeddings added (no token types), LayerNorm; `n_layers`
post-norm blocks (SelfAttention → residual → `sa_layer_norm`, `ffn.lin1` → activation →
`ffn.lin2` → dropout → residual → `output_layer_norm`; no dropout after the attention's
projection, as in transformers); every LayerNorm's epsilon is 1e-12. The base model's output
is `last_hidden_state` (there is no pooler). The sequence classifier scores the first token
through `pre_classifier` → ReLU → dropout (`seq_classif_dropout`) → `classifier`; the
question-answering head gives `start_logits` and `end_logits` after a dropout of
`qa_dropout`; the masked-LM head is `vocab_transform` → activation → `vocab_layer_norm` →
`vocab_projector` (its weight tied to the word embeddings, its bias its own). Input
`input_ids` only. The tensors sit under ``distilbert.`` in a head model's file.

`sinusoidal_pos_embds` true: the file holds the sinusoidal table, which loads into the
position embedding as any learned table (transformers 5 trains it too).
"""
from __future__ import annotations

from .builder import Family, Names, divisor
from .config import Config, keys
from .saving import Sayable
from .weights import W

# checkpoint tensor (after "transformer.layer.{i}.")   learnable(s) (after the same)
BLOCK = [
    W("attention.q_lin.weight",                 "attention/query.weight"),
    W("attention.q_lin.bias",                   "attention/query.bias"),
    W("attention.k_lin.weight",                 "attention/key.weight"),
    W("attention.k_lin.bias",                   "attention/key.bias"),
    W("attention.v_lin.weight",                 "attention/value.weight"),
    W("attention.v_lin.bias",                   "attention/value.bias"),
    W("attention.out_lin.weight",               "attention/output.weight"),
    W("attention.out_lin.bias",                 "attention/output.bias"),
    W("sa_layer_norm.weight",                   "sa_layer_norm/weight"),
    W("sa_layer_norm.bias",                     "sa_layer_norm/bias"),
    W("ffn.lin1.weight",                        "ffn.lin1/weight"),
    W("ffn.lin1.bias",                          "ffn.lin1/bias"),
    W("ffn.lin2.weight",                        "ffn.lin2/weight"),
    W("ffn.lin2.bias",                          "ffn.lin2/bias"),
    W("output_layer_norm.weight",               "output_layer_norm/weight"),
    W("output_layer_norm.bias",                 "output_layer_norm/bias"),
]


def positions(cfg: Config) -> int:
    """The rows of the position table; a sinusoidal one is in the file as a learned one is."""
    cfg.flag("sinusoidal_pos_embds", False)
    return cfg.int("max_position_embeddings")


SAYABLE = Sayable(
    blocks=(("n_layers", r"^transformer\.layer\.(\d+)\.", None),),
    vocab=("vocab_size", "embeddings.word_embeddings"), labels="classifier",
    head=("vocab_projector", "embeddings.word_embeddings"),
    hints=((r"ffn\.activation$", "", "activation"), (r"dropout$", "p", "dropout"),
           (r"\.attention$", "dropout", "attention_dropout"),
           (r"ffn\.lin1$", "out", "hidden_dim"),
           (r"position_embeddings$", "max_length", "max_position_embeddings")))

FAMILY = Family(
    architectures=("DistilBertForMaskedLM", "DistilBertForSequenceClassification",
                   "DistilBertForTokenClassification", "DistilBertForQuestionAnswering",
                   "DistilBertModel"),
    keys=keys(
        read="vocab_size max_position_embeddings sinusoidal_pos_embds n_layers n_heads dim "
             "hidden_dim dropout attention_dropout activation qa_dropout seq_classif_dropout "
             "tie_word_embeddings",
        # what older configs called the masked-LM head's tie; tie_word_embeddings says it now
        ignored="tie_weights_"),
    heads={"DistilBertForMaskedLM": "masked-lm",
           "DistilBertForSequenceClassification": "first-mlp-classifier",
           "DistilBertForTokenClassification": "token-classifier",
           "DistilBertForQuestionAnswering": "span", "DistilBertModel": "hidden"},
    block_table=lambda c: BLOCK,
    blocks=lambda c: c.int("n_layers"),
    width=lambda c: c.int("dim"),
    num_heads=lambda c: divisor(c, "n_heads", c.int("dim"), "dim"),
    vocab=lambda c: c.int("vocab_size"),
    inner=lambda c: c.int("hidden_dim"),
    norm="layer", eps=1e-12, placement="post", causal=False, attention_bias=True,
    attention_dropout=lambda c: c.probability("attention_dropout", 0.1),
    ffn="mlp", activation=("activation", "gelu"), mlp_bias=True,
    residual_dropout=lambda c: c.probability("dropout", 0.1),
    attention_output_dropout=0.0,
    positions=positions,
    embedding_norm=True, final_norm=False,
    embedding_dropout=lambda c: c.probability("dropout", 0.1),
    classifier_bias=True,
    classifier_dropout=lambda c: c.probability("seq_classif_dropout", 0.2),
    token_classifier_dropout=lambda c: c.probability("dropout", 0.1),
    qa_dropout=lambda c: c.probability("qa_dropout", 0.1),
    pre_classifier_activation="relu",
    tied=lambda c: c.flag("tie_word_embeddings", True),
    prefix="distilbert.", cross_prefix=True,
    names=Names(tokens="embeddings.word_embeddings", positions="embeddings.position_embeddings",
                embeddings="embeddings.add", embeddings_dropout="embeddings.dropout",
                block="transformer.layer.{i}", attention="attention",
                attention_dropout="sa_dropout", add_1="sa_add", norm_1="sa_layer_norm",
                up="ffn.lin1", act="ffn.activation", down="ffn.lin2", mlp_dropout="ffn.dropout",
                add_2="output_add", norm_2="output_layer_norm",
                classifier="classifier",
                masked_lm_parts=("vocab_transform", "activation", "vocab_layer_norm",
                                 "vocab_projector", None)),
    sayable=SAYABLE,
)
