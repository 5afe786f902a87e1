"""RoBERTa (`model_type` "roberta"): `RobertaModel`, `RobertaForMaskedLM` (what the Hub's
checkpoints are saved as) and the heads people fine-tune, `RobertaForSequenceClassification`,
`RobertaForTokenClassification` and `RobertaForQuestionAnswering`.

BERT's description (`bert.py`: post-norm blocks, token types, the pooler of the base model)
with RoBERTa's positions: counted over the tokens that are not padding, from `pad_token_id`
+ 1 on, as transformers' `create_position_ids_from_input_ids` counts them
(`TokenPositionEmbedding`). So a position depends on which tokens are padding: a
`pad_token_id` inside a sequence takes the padding row and is not counted, left padding
shifts nothing. The sequence classifier scores the first token (`<s>`) through a Dense →
tanh (`classifier.dense`) and `classifier.out_proj`; the question-answering head gives
`start_logits` and `end_logits`; the masked-LM head is `lm_head` (Dense → GELU → LayerNorm →
the decoder, tied to the word embeddings). The tensors sit under ``roberta.`` in a head
model's file.
"""
from __future__ import annotations

import dataclasses

from . import bert
from .builder import Family
from .config import Config, keys
from .saving import SAYABLE, Sayable


def token_positions(cfg: Config) -> tuple[int, int]:
    """(rows of the position table, the padding id positions count from)."""
    rows = cfg.int("max_position_embeddings")
    if "pad_token_id" in cfg.data and cfg.data["pad_token_id"] is None:
        raise cfg.bad("pad_token_id", None, "the padding token's id, which RoBERTa's positions "
                      "count from (an integer ≥ 0; transformers cannot run the model without it)")
    padding = cfg.int("pad_token_id", 1, least=0)
    most = cfg.data["max_position_embeddings"] - 2      # the file's value, also where capped
    if padding > most:
        raise cfg.bad("pad_token_id", padding, f"an id below max_position_embeddings − 1 "
                      f"({most + 1}): the position table's rows start past it")
    return rows, padding


def sayable(architecture: str) -> Sayable:
    """What a RoBERTa config.json can say of an edited network: BERT's, its scores in
    `classifier.out_proj` for the sequence classifier, its masked-LM decoder `lm_head.decoder`."""
    labels = "classifier.out_proj" if architecture == "RobertaForSequenceClassification" \
        else "classifier"
    return dataclasses.replace(SAYABLE["bert"], labels=labels,
                               head=("lm_head.decoder", "embeddings.word_embeddings"))


FAMILY: Family = dataclasses.replace(
    bert.FAMILY,
    architectures=("RobertaForMaskedLM", "RobertaForSequenceClassification",
                   "RobertaForTokenClassification", "RobertaForQuestionAnswering",
                   "RobertaModel"),
    keys=keys(
        read="vocab_size hidden_size num_hidden_layers num_attention_heads intermediate_size "
             "hidden_act hidden_dropout_prob attention_probs_dropout_prob "
             "max_position_embeddings type_vocab_size layer_norm_eps classifier_dropout "
             "pad_token_id tie_word_embeddings",
        fixed={"position_embedding_type": ("absolute",)}),
    heads={"RobertaForMaskedLM": "masked-lm",
           "RobertaForSequenceClassification": "first-mlp-classifier",
           "RobertaForTokenClassification": "token-classifier",
           "RobertaForQuestionAnswering": "span", "RobertaModel": "pooled"},
    positions=None, token_positions=token_positions,
    pre_classifier_dropout=bert.classifier_dropout,
    masked_lm_activation="gelu",                  # RobertaLMHead's, whatever hidden_act says
    prefix="roberta.",
    names=dataclasses.replace(bert.FAMILY.names, pre_classifier="classifier.dense",
                              pre_classifier_act="classifier.act",
                              mlp_classifier="classifier.out_proj",
                              masked_lm_parts=("lm_head.dense", "lm_head.act",
                                               "lm_head.layer_norm", "lm_head.decoder",
                                               "lm_head.bias")),
    sayable=sayable,
)
