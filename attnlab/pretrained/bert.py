"""BERT (`model_type` "bert"): `BertModel`, `BertForMaskedLM`, `BertForSequenceClassification`
and `BertForTokenClassification`.

The graph: word, position and token-type embeddings added, LayerNorm; `num_hidden_layers`
post-norm blocks (SelfAttention → residual → LayerNorm, Dense → activation → Dense →
residual → LayerNorm); then the model's head. Inputs `input_ids` and `token_type_ids` (B×T
ids; padding, from a list of id sequences or `al.Padded`, plays `attention_mask`). Layers are
named after the checkpoint's modules (`encoder.layer.0.attention`, `pooler.dense`).
"""
from __future__ import annotations

from .. import layers as L
from ..network import Network
from .common import activation, dropout, output, residual, under
from .config import Config, keys
from .weights import W, Weight

ARCHITECTURES = ("BertForMaskedLM", "BertForSequenceClassification",
                 "BertForTokenClassification", "BertModel")

KEYS = keys(
    read="vocab_size hidden_size num_hidden_layers num_attention_heads intermediate_size "
         "hidden_act hidden_dropout_prob attention_probs_dropout_prob max_position_embeddings "
         "type_vocab_size layer_norm_eps classifier_dropout tie_word_embeddings",
    fixed={"position_embedding_type": ("absolute",)},
    # keys of Google's original BERT configs and older transformers that no model code reads
    ignored="directionality pooler_fc_size pooler_num_attention_heads pooler_num_fc_layers "
            "pooler_size_per_head pooler_type output_past",
)

# where the base model's tensors sit in a head model's file
PREFIX = "bert."

IGNORED_TENSORS = ("embeddings.position_ids",)      # a buffer 4.x files hold

# checkpoint tensor (after "encoder.layer.{i}.")   learnable(s) (after "encoder.layer.{i}.")
BLOCK = [
    W("attention.self.query.weight",            "attention/query.weight"),
    W("attention.self.query.bias",              "attention/query.bias"),
    W("attention.self.key.weight",              "attention/key.weight"),
    W("attention.self.key.bias",                "attention/key.bias"),
    W("attention.self.value.weight",            "attention/value.weight"),
    W("attention.self.value.bias",              "attention/value.bias"),
    W("attention.output.dense.weight",          "attention/output.weight"),
    W("attention.output.dense.bias",            "attention/output.bias"),
    W("attention.output.LayerNorm.weight",      "attention.output.LayerNorm/weight"),
    W("attention.output.LayerNorm.bias",        "attention.output.LayerNorm/bias"),
    W("intermediate.dense.weight",              "intermediate.dense/weight"),
    W("intermediate.dense.bias",                "intermediate.dense/bias"),
    W("output.dense.weight",                    "output.dense/weight"),
    W("output.dense.bias",                      "output.dense/bias"),
    W("output.LayerNorm.weight",                "output.LayerNorm/weight"),
    W("output.LayerNorm.bias",                  "output.LayerNorm/bias"),
]

EMBEDDINGS = [
    W("embeddings.word_embeddings.weight",       "embeddings.word_embeddings/weight"),
    W("embeddings.position_embeddings.weight",   "embeddings.position_embeddings/weight"),
    W("embeddings.token_type_embeddings.weight", "embeddings.token_type_embeddings/weight"),
    W("embeddings.LayerNorm.weight",             "embeddings.LayerNorm/weight"),
    W("embeddings.LayerNorm.bias",               "embeddings.LayerNorm/bias"),
]

POOLER = [W("pooler.dense.weight", "pooler.dense/weight"),
          W("pooler.dense.bias", "pooler.dense/bias")]

CLASSIFIER = [W("classifier.weight", "classifier/weight"),
              W("classifier.bias", "classifier/bias")]


def _mlm_head(tied: bool) -> list[Weight]:
    return [
        W("cls.predictions.transform.dense.weight", "cls.predictions.transform.dense/weight"),
        W("cls.predictions.transform.dense.bias", "cls.predictions.transform.dense/bias"),
        W("cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.LayerNorm/weight"),
        W("cls.predictions.transform.LayerNorm.bias", "cls.predictions.transform.LayerNorm/bias"),
        W("cls.predictions.decoder.weight", "cls.predictions.decoder/weight",
          tied="embeddings.word_embeddings/weight" if tied else False),
        W("cls.predictions.bias", "cls.predictions.decoder/bias"),
        W("cls.predictions.decoder.bias", "cls.predictions.decoder/bias", tied=True),
    ]


def _pooled(architecture: str) -> bool:
    return architecture in ("BertModel", "BertForSequenceClassification")


def weights(cfg: Config, architecture: str) -> list[Weight]:
    base = "" if architecture == "BertModel" else "bert."
    table = under(EMBEDDINGS, base, "")
    for i in range(cfg.int("num_hidden_layers")):
        table += under(BLOCK, f"{base}encoder.layer.{i}.", f"encoder.layer.{i}.")
    if _pooled(architecture):
        table += under(POOLER, base, "")
    if architecture == "BertForMaskedLM":
        table += _mlm_head(cfg.flag("tie_word_embeddings", True))
    elif architecture != "BertModel":
        table += CLASSIFIER
    return table


def network(cfg: Config, architecture: str) -> Network:
    c, heads = cfg.int("hidden_size"), cfg.int("num_attention_heads")
    vocab, eps = cfg.int("vocab_size"), cfg.float("layer_norm_eps", 1e-12)
    drop = cfg.probability("hidden_dropout_prob", 0.1)
    if c % heads:
        raise cfg.bad("num_attention_heads", heads, f"a divisor of hidden_size ({c})")

    e = "embeddings"
    net = Network([L.TokenInput(name="input_ids"), L.Embedding(vocab, c, name=f"{e}.word_embeddings")])
    net.add([L.TokenInput(name="token_type_ids"),
             L.Embedding(cfg.int("type_vocab_size", 2), c, name=f"{e}.token_type_embeddings")])
    net.add(L.PositionEmbedding(cfg.int("max_position_embeddings"), name=f"{e}.position_embeddings"))
    net.connect(f"{e}.word_embeddings", f"{e}.position_embeddings")
    net.add([L.Addition(3, name=f"{e}.add"), L.LayerNorm(eps, name=f"{e}.LayerNorm")])
    for port, src in enumerate(("word_embeddings", "token_type_embeddings", "position_embeddings")):
        net.connect(f"{e}.{src}", f"{e}.add/in{port + 1}")
    x = dropout(net, f"{e}.LayerNorm", drop, f"{e}.dropout")
    for i in range(cfg.int("num_hidden_layers")):
        b = f"encoder.layer.{i}"
        net.add(L.SelfAttention(heads, c, dropout=cfg.probability("attention_probs_dropout_prob", 0.1),
                                name=f"{b}.attention"))
        net.connect(x, f"{b}.attention")
        x = _add_norm(net, x, dropout(net, f"{b}.attention", drop, f"{b}.attention.output.dropout"),
                      f"{b}.attention.output", eps)
        net.add([L.Dense(cfg.int("intermediate_size"), name=f"{b}.intermediate.dense"),
                 activation(cfg, "hidden_act", f"{b}.intermediate.act", "gelu"),
                 L.Dense(c, name=f"{b}.output.dense")])
        net.connect(x, f"{b}.intermediate.dense")
        x = _add_norm(net, x, dropout(net, f"{b}.output.dense", drop, f"{b}.output.dropout"),
                      f"{b}.output", eps)
    if _pooled(architecture):
        net.add([L.Index1d("first", name="pooler.first"), L.Dense(c, name="pooler.dense"),
                 L.Tanh(name="pooler.activation")])
        net.connect(x, "pooler.first")
    if architecture == "BertModel":
        net.add(output("last_hidden_state")).connect(x, "last_hidden_state")
        net.add(output("pooler_output")).connect("pooler.activation", "pooler_output")
    elif architecture == "BertForMaskedLM":
        t = "cls.predictions.transform"
        tied = f"{e}.word_embeddings" if cfg.flag("tie_word_embeddings", True) else None
        net.add([L.Dense(c, name=f"{t}.dense"), activation(cfg, "hidden_act", f"{t}.act", "gelu"),
                 L.LayerNorm(eps, name=f"{t}.LayerNorm"),
                 L.Dense(vocab, tied_to=tied, name="cls.predictions.decoder"), output("logits")])
        net.connect(x, f"{t}.dense")
    else:
        p = cfg.get("classifier_dropout", None)
        p = drop if p is None else cfg.probability("classifier_dropout")
        src = "pooler.activation" if architecture == "BertForSequenceClassification" else x
        head = dropout(net, src, p, "dropout")
        net.add([L.Dense(cfg.num_labels(), name="classifier"), output("logits")])
        net.connect(head, "classifier")
    return net


def _add_norm(net: Network, skip: str, x: str, name: str, eps: float) -> str:
    """LayerNorm(skip + x), BERT's post-norm residual: the layers `{name}.add` and
    `{name}.LayerNorm`."""
    added = residual(net, skip, x, f"{name}.add")
    net.add(L.LayerNorm(eps, name=f"{name}.LayerNorm"))
    net.connect(added, f"{name}.LayerNorm")
    return f"{name}.LayerNorm"
