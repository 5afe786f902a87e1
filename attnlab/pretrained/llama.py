"""Llama (`model_type` "llama"): `LlamaForCausalLM` and the base `LlamaModel`.

The graph: the token embedding, `num_hidden_layers` pre-norm blocks (RMSNorm → causal
SelfAttention with rotary positions and grouped key/value heads, no projection biases →
residual; RMSNorm → GLU (SwiGLU: ``silu(gate(x)) * up(x)``) → Dense (the down projection) →
residual), a final RMSNorm and, for the LM head, the output projection (tied to the token
embedding when `tie_word_embeddings`). Layers are named after the checkpoint's modules
(`layers.0.self_attn`, `layers.0.mlp`, `norm`); the tensors of `LlamaForCausalLM` sit under
``model.``.

Rotary positions: `rope_theta` at the top level (transformers 4.x) or in `rope_parameters`
(5.x); only the original rotary embedding (`rope_type` "default") is built — a scaled one
(linear, dynamic, yarn, llama3, …) is refused, naming the key. Mistral (`mistral.py`) is this
model with a sliding window.
"""
from __future__ import annotations

from .. import layers as L
from ..network import Network
from .common import output, under
from .config import Config, keys
from .weights import W, Weight

ARCHITECTURES = ("LlamaForCausalLM", "LlamaModel")

KEYS = keys(
    read="vocab_size hidden_size intermediate_size num_hidden_layers num_attention_heads "
         "num_key_value_heads head_dim hidden_act max_position_embeddings rms_norm_eps "
         "attention_bias attention_dropout mlp_bias tie_word_embeddings rope_theta rope_scaling",
    # pretraining_tp > 1 splits the same products into slices: the same function
    ignored="pretraining_tp",
)

IGNORED_TENSORS = (".rotary_emb.inv_freq",)

# transformers' hidden_act → GLU's activation
GLU_ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu": "gelu",
                   "gelu_pytorch_tanh": "gelu-tanh", "gelu_new": "gelu-tanh"}

# checkpoint tensor (after "layers.{i}.")   learnable(s) (after "layers.{i}.")
ATTENTION = [
    W("self_attn.q_proj.weight",             "self_attn/query.weight"),
    W("self_attn.k_proj.weight",             "self_attn/key.weight"),
    W("self_attn.v_proj.weight",             "self_attn/value.weight"),
    W("self_attn.o_proj.weight",             "self_attn/output.weight"),
]
ATTENTION_BIAS = [
    W("self_attn.q_proj.bias",               "self_attn/query.bias"),
    W("self_attn.k_proj.bias",               "self_attn/key.bias"),
    W("self_attn.v_proj.bias",               "self_attn/value.bias"),
    W("self_attn.o_proj.bias",               "self_attn/output.bias"),
]
MLP = [
    W("mlp.gate_proj.weight",                "mlp/gate.weight"),
    W("mlp.up_proj.weight",                  "mlp/up.weight"),
    W("mlp.down_proj.weight",                "mlp.down_proj/weight"),
]
MLP_BIAS = [
    W("mlp.gate_proj.bias",                  "mlp/gate.bias"),
    W("mlp.up_proj.bias",                    "mlp/up.bias"),
    W("mlp.down_proj.bias",                  "mlp.down_proj/bias"),
]
NORMS = [
    W("input_layernorm.weight",              "input_layernorm/weight"),
    W("post_attention_layernorm.weight",     "post_attention_layernorm/weight"),
]


def _prefix(architecture: str) -> str:
    return "" if architecture.endswith("Model") else "model."


def _biases(cfg: Config, configurable: bool) -> tuple[bool, bool]:
    """(attention projections, MLP) biases: Llama's `attention_bias` and `mlp_bias`; a family
    without those keys (Mistral) has none."""
    if not configurable:
        return False, False
    return cfg.flag("attention_bias", False), cfg.flag("mlp_bias", False)


def weights(cfg: Config, architecture: str, biases: bool = True) -> list[Weight]:
    """The table; `biases`: whether the config's bias keys are read (Mistral has none)."""
    p = _prefix(architecture)
    attention_bias, mlp_bias = _biases(cfg, biases)
    block = ATTENTION + (ATTENTION_BIAS if attention_bias else []) + MLP + \
        (MLP_BIAS if mlp_bias else []) + NORMS
    table = [W(p + "embed_tokens.weight", "embed_tokens/weight")]
    for i in range(cfg.int("num_hidden_layers")):
        table += under(block, f"{p}layers.{i}.", f"layers.{i}.")
    table.append(W(p + "norm.weight", "norm/weight"))
    if not architecture.endswith("Model"):
        table.append(W("lm_head.weight", "lm_head/weight",
                       tied=cfg.flag("tie_word_embeddings", False)))
    return table


def rotary(cfg: Config) -> dict:
    """The attention layers' `rotary` settings from the config (either layout); a scaled
    rotary embedding is refused, naming the key that asks for it."""
    rope = cfg.rope()
    if rope["rope_type"] != "default":
        key = "rope_parameters" if "rope_parameters" in cfg.data else "rope_scaling"
        raise cfg.unsupported(key, cfg.data.get(key), "supported: rope_type \"default\", the "
                              "original rotary embedding with rope_theta")
    return {"base": float(rope["rope_theta"])}


def network(cfg: Config, architecture: str, window: int | None = None,
            biases: bool = True) -> Network:
    """The Llama graph (Mistral's: with its `window`, without the bias keys)."""
    c, heads = cfg.int("hidden_size"), cfg.int("num_attention_heads")
    kv_heads = cfg.int("num_key_value_heads", heads)
    head_dim = cfg.int("head_dim", c // heads)
    vocab, eps = cfg.int("vocab_size"), cfg.float("rms_norm_eps", 1e-6)
    inner = cfg.int("intermediate_size")
    attn_drop = cfg.probability("attention_dropout", 0.0)
    act = cfg.choice("hidden_act", GLU_ACTIVATIONS, "silu")
    attention_bias, mlp_bias = _biases(cfg, biases)
    rope = rotary(cfg)
    cfg.int("max_position_embeddings", 2048)        # rotary positions have no learned limit
    if heads % kv_heads:
        raise cfg.bad("num_key_value_heads", kv_heads,
                      f"a divisor of num_attention_heads ({heads})")

    net = Network([L.TokenInput(name="input_ids"), L.Embedding(vocab, c, name="embed_tokens")])
    x = "embed_tokens"
    for i in range(cfg.int("num_hidden_layers")):
        h = f"layers.{i}"
        net.add([L.RMSNorm(eps, name=f"{h}.input_layernorm"),
                 L.SelfAttention(heads, heads * head_dim, output_channels=c,
                                 attention_mask="causal", dropout=attn_drop,
                                 num_kv_heads=kv_heads, rotary=rope, window=window,
                                 projection_bias=attention_bias, name=f"{h}.self_attn")])
        net.connect(x, f"{h}.input_layernorm")
        x = _residual(net, x, f"{h}.self_attn", f"{h}.add_1")
        net.add([L.RMSNorm(eps, name=f"{h}.post_attention_layernorm"),
                 L.GLU(inner, activation=act, bias=mlp_bias, name=f"{h}.mlp"),
                 L.Dense(c, bias=mlp_bias, name=f"{h}.mlp.down_proj")])
        net.connect(x, f"{h}.post_attention_layernorm")
        x = _residual(net, x, f"{h}.mlp.down_proj", f"{h}.add_2")
    net.add(L.RMSNorm(eps, name="norm"))
    net.connect(x, "norm")
    if architecture.endswith("Model"):
        net.add(output("last_hidden_state"))
        net.connect("norm", "last_hidden_state")
    else:
        tied = cfg.flag("tie_word_embeddings", False)
        net.add([head(vocab, "embed_tokens" if tied else None), output("logits")])
        net.connect("norm", "lm_head")
    return net


def head(vocab: int, tied_to: str | None) -> L.Dense:
    """The output projection `lm_head`, sharing the embedding `tied_to`'s weight if given."""
    if tied_to is None:
        return L.Dense(vocab, bias=False, name="lm_head")
    return L.Dense(vocab, bias=False, tied_to=tied_to, name="lm_head")


def _residual(net: Network, skip: str, x: str, name: str) -> str:
    net.add(L.Addition(2, name=name))
    net.connect(skip, f"{name}/in1").connect(x, f"{name}/in2")
    return name
