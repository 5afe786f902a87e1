"""Transformer blocks: equal to torch's encoder and decoder layers, padded, trained, saved,
streamed, and stacked into a small GPT that learns a toy task."""
import pytest
import torch
from torch import nn

import attnlab as al
from attnlab import layers as L

D, H, F = 16, 4, 32


def copy_attention(dst, prefix, mha: nn.MultiheadAttention):
    """torch's in_proj (q, k, v stacked) and out_proj → query, key, value, output."""
    d = mha.embed_dim
    with torch.no_grad():
        for i, part in enumerate(("query", "key", "value")):
            dst[f"{prefix}/{part}.weight"].copy_(mha.in_proj_weight[i * d:(i + 1) * d])
            dst[f"{prefix}/{part}.bias"].copy_(mha.in_proj_bias[i * d:(i + 1) * d])
        dst[f"{prefix}/output.weight"].copy_(mha.out_proj.weight)
        dst[f"{prefix}/output.bias"].copy_(mha.out_proj.bias)


def copy_block(net, block, ref):
    """The weights of a torch Transformer{Encoder,Decoder}Layer into the block `block`."""
    dst = net.learnables
    copy_attention(dst, f"{block}/self_attn", ref.self_attn)
    if hasattr(ref, "multihead_attn"):
        copy_attention(dst, f"{block}/multihead_attn", ref.multihead_attn)
    norms = [n for n in ("norm1", "norm2", "norm3") if hasattr(ref, n)]
    with torch.no_grad():
        for m in ("linear1", "linear2", *norms):
            for t in ("weight", "bias"):
                dst[f"{block}/{m}/{t}"].copy_(getattr(getattr(ref, m), t))


def encoder_pair(norm, dropout=0.1, **kw):
    torch.manual_seed(0)
    net = al.Network([L.SequenceInput(D, name="x"),
                      al.blocks.transformer_encoder(D, H, F, norm=norm, dropout=dropout, **kw)])
    ref = nn.TransformerEncoderLayer(D, H, F, dropout=dropout, batch_first=True,
                                     norm_first=norm == "pre")
    copy_block(net, "encoder", ref)
    return net, ref


def decoder_pair(norm, dropout=0.1, memory_channels=D, **kw):
    torch.manual_seed(0)
    net = al.Network()
    net.add(L.SequenceInput(D, name="tgt"))
    net.add(L.SequenceInput(memory_channels, name="mem"))
    net.add(al.blocks.transformer_decoder(D, H, F, norm=norm, dropout=dropout, **kw))
    net.connect("tgt", "decoder/in")
    net.connect("mem", "decoder/memory")
    ref = nn.TransformerDecoderLayer(D, H, F, dropout=dropout, batch_first=True,
                                     norm_first=norm == "pre")
    copy_block(net, "decoder", ref)
    return net, ref


def causal(t):
    return nn.Transformer.generate_square_subsequent_mask(t)


def close(a, b, tol=1e-5):
    torch.testing.assert_close(a, b, atol=tol, rtol=0)


# -- the blocks as graphs -------------------------------------------------------------------

def test_encoder_layers_ports_and_learnables():
    blk = al.blocks.transformer_encoder(D, H, F)
    assert blk.input_names == ["in"] and blk.output_names == ["out"]
    names = {l.name for l in blk.layers}
    assert {"self_attn", "linear1", "linear2", "norm1", "norm2"} <= names
    net = al.Network([L.SequenceInput(D), blk])
    ref = nn.TransformerEncoderLayer(D, H, F, batch_first=True)
    assert net.analyze().total_learnables == sum(p.numel() for p in ref.parameters())
    kinds = {l.name: l.type_name for l in blk.layers}
    assert kinds["self_attn"] == "SelfAttention" and kinds["linear1"] == "Dense"


def test_decoder_inputs_are_in_and_memory():
    blk = al.blocks.transformer_decoder(D, H, F)
    assert blk.input_names == ["in", "memory"] and blk.output_names == ["out"]
    net, ref = decoder_pair("post")
    assert net.analyze().total_learnables == sum(p.numel() for p in ref.parameters())
    assert blk.layers["self_attn"].attention_mask == "causal"


def test_no_dropout_layers_when_dropout_is_zero():
    blk = al.blocks.transformer_encoder(D, H, F, dropout=0)
    assert not [l for l in blk.layers if l.type_name == "Dropout"]
    assert len([l for l in al.blocks.transformer_encoder(D, H, F).layers
                if l.type_name == "Dropout"]) == 3


# -- equal to torch -------------------------------------------------------------------------

@pytest.mark.parametrize("norm", ["post", "pre"])
def test_encoder_equals_torch(norm):
    net, ref = encoder_pair(norm)
    net.eval(), ref.eval()
    x = torch.randn(3, 7, D)
    close(net(x), ref(x))


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_encoder_equals_torch_on_a_padded_batch(norm):
    net, ref = encoder_pair(norm)
    net.eval(), ref.eval()
    lengths = [7, 3, 5]
    seqs = [torch.randn(t, D) for t in lengths]
    padded = al.pad_sequences(seqs)
    out = net(padded)
    want = ref(padded.data, src_key_padding_mask=~padded.mask)
    for i, t in enumerate(lengths):
        close(out[i, :t], want[i, :t])
        close(net(seqs[i][None])[0], want[i, :t])           # alone, unpadded


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_causal_encoder_equals_torch_with_is_causal(norm):
    net, ref = encoder_pair(norm, causal=True)
    net.eval(), ref.eval()
    x = torch.randn(2, 6, D)
    close(net(x), ref(x, src_mask=causal(6), is_causal=True))


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_decoder_equals_torch(norm):
    net, ref = decoder_pair(norm)
    net.eval(), ref.eval()
    tgt, mem = torch.randn(2, 5, D), torch.randn(2, 8, D)
    close(net({"tgt": tgt, "mem": mem}), ref(tgt, mem, tgt_mask=causal(5), tgt_is_causal=True))


def test_a_non_causal_decoder_equals_torch_without_tgt_mask():
    net, ref = decoder_pair("post", causal=False)
    net.eval(), ref.eval()
    tgt, mem = torch.randn(2, 5, D), torch.randn(2, 8, D)
    close(net({"tgt": tgt, "mem": mem}), ref(tgt, mem))


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_decoder_equals_torch_on_padded_target_and_memory(norm):
    net, ref = decoder_pair(norm)
    net.eval(), ref.eval()
    tl, ml = [5, 2, 4], [3, 8, 6]
    tgt = al.pad_sequences([torch.randn(t, D) for t in tl])
    mem = al.pad_sequences([torch.randn(t, D) for t in ml])
    out = net({"tgt": tgt, "mem": mem})
    want = ref(tgt.data, mem.data, tgt_mask=causal(5), tgt_key_padding_mask=~tgt.mask,
               memory_key_padding_mask=~mem.mask)
    for i, t in enumerate(tl):
        close(out[i, :t], want[i, :t])


def test_decoder_memory_of_another_width():
    net = al.Network()
    net.add(L.SequenceInput(D, name="tgt"))
    net.add(L.SequenceInput(6, name="mem"))
    net.add(al.blocks.transformer_decoder(D, H, F))
    net.connect("tgt", "decoder/in")
    net.connect("mem", "decoder/memory")
    out = net({"tgt": torch.randn(2, 3, D), "mem": torch.randn(2, 4, 6)})
    assert out.shape == (2, 3, D)


# -- training, saving, streaming ------------------------------------------------------------

@pytest.mark.parametrize("norm", ["post", "pre"])
def test_training_step_gradients_equal_torch(norm):
    net, ref = decoder_pair(norm, dropout=0.0)
    net.train(), ref.train()
    tgt, mem = torch.randn(2, 5, D), torch.randn(2, 4, D)
    w = torch.randn(2, 5, D)
    (net({"tgt": tgt, "mem": mem}) * w).sum().backward()
    (ref(tgt, mem, tgt_mask=causal(5)) * w).sum().backward()
    grads = net.learnables
    close(grads["decoder/linear1/weight"].grad, ref.linear1.weight.grad, 1e-4)
    close(grads["decoder/norm3/weight"].grad, ref.norm3.weight.grad, 1e-4)
    close(grads["decoder/multihead_attn/output.weight"].grad,
          ref.multihead_attn.out_proj.weight.grad, 1e-4)
    close(grads["decoder/self_attn/query.weight"].grad, ref.self_attn.in_proj_weight.grad[:D], 1e-4)
    # one optimiser step changes the outputs, dropout on in training mode
    net2, _ = encoder_pair(norm)
    opt = torch.optim.SGD(net2.parameters(), lr=0.1)
    x = torch.randn(4, 6, D)
    before = net2.eval()(x).detach()
    net2.train()
    loss = net2(x).pow(2).mean()
    loss.backward()
    opt.step()
    assert not torch.allclose(net2.eval()(x), before)


def test_save_and_load(tmp_path):
    net, _ = decoder_pair("pre")
    net.eval()
    x = {"tgt": torch.randn(2, 5, D), "mem": torch.randn(2, 3, D)}
    net.save(tmp_path / "dec.attnlab")
    back = al.load(tmp_path / "dec.attnlab")
    back.eval()
    close(back(x), net(x), 0)
    assert [l.name for l in back.layers["decoder"].layers] == [l.name for l in
                                                               net.layers["decoder"].layers]


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_decoder_streams_step_by_step(norm):
    net, _ = decoder_pair(norm)
    net.eval()
    tgt, mem = torch.randn(2, 6, D), torch.randn(2, 4, D)
    full = net({"tgt": tgt, "mem": mem})
    s = net.stream(static_inputs={"mem": mem})
    steps = [s.step(tgt[:, :2])] + [s.step(tgt[:, t:t + 1]) for t in range(2, 6)]
    close(torch.cat(steps, 1), full)


def test_decoder_streams_over_a_padded_memory():
    net, _ = decoder_pair("pre")
    net.eval()
    mem = al.pad_sequences([torch.randn(t, D) for t in (4, 2)])
    tgt = torch.randn(2, 5, D)
    full = net({"tgt": tgt, "mem": mem})
    s = net.stream(static_inputs={"mem": mem})
    close(torch.cat([s.step(tgt[:, t:t + 1]) for t in range(5)], 1), full)


def test_encoder_decoder_model_streams_with_the_encoder_static():
    torch.manual_seed(1)
    net = al.Network()
    net.add([L.SequenceInput(D, name="src"), al.blocks.transformer_encoder(D, H, F)])
    net.add([L.SequenceInput(D, name="tgt"), al.blocks.transformer_decoder(D, H, F),
             L.Dense(3, name="head")])
    net.connect("encoder", "decoder/memory")
    net.eval()
    src, tgt = torch.randn(2, 5, D), torch.randn(2, 4, D)
    full = net({"src": src, "tgt": tgt})
    s = net.stream(static_inputs={"src": src})
    close(torch.cat([s.step(tgt[:, t:t + 1]) for t in range(4)], 1), full)


# -- a GPT from blocks ----------------------------------------------------------------------

def gpt(vocab, d=32, heads=4, blocks=2, length=16):
    net = al.Network([L.TokenInput(name="ids"), L.Embedding(vocab, d, name="tok")])
    net.add(L.PositionEmbedding(length, name="pos"))
    net.connect("tok", "pos")
    net.add(L.Addition(2, name="embed"))
    net.connect("tok", "embed/in1")
    net.connect("pos", "embed/in2")
    prev = "embed"
    for i in range(blocks):
        blk = al.blocks.transformer_encoder(d, heads, 4 * d, norm="pre", dropout=0.0,
                                            activation="gelu", causal=True, name=f"block{i}")
        net.add(blk)
        net.connect(prev, blk.name)
        prev = blk.name
    net.add([L.LayerNorm(name="ln_f"), L.Dense(vocab, name="lm_head")])
    net.connect(prev, "ln_f")
    return net


def test_gpt_from_blocks_learns_a_toy_task_and_generates_it():
    torch.manual_seed(0)
    vocab, period = 6, 3                     # the next token is (token + 1) mod 3, from 0…2
    net = gpt(vocab, d=16, heads=2)
    starts = torch.randint(0, period, (64,))
    seqs = (starts[:, None] + torch.arange(13)) % period
    x, y = seqs[:, :-1], seqs[:, 1:]
    opts = al.TrainingOptions(solver="adam", learning_rate=1e-2, max_epochs=15, batch_size=32,
                              seed=0, plots=None, verbose=False)
    losses = al.train(net, x, y, loss="crossentropy", options=opts).history["loss"]
    assert losses[-1] < 0.1 * losses[0]
    net.eval()
    out = al.generate(net, start=torch.tensor([[1, 2]]), max_new_tokens=8)
    assert out.tokens[0, :6].tolist() == [0, 1, 2, 0, 1, 2]
    # streaming the stack equals its forward pass
    ids = seqs[:2, :10]
    full = net(ids)
    s = net.stream()
    close(torch.cat([s.step(ids[:, t:t + 1]) for t in range(10)], 1), full, 1e-4)


# -- bad arguments --------------------------------------------------------------------------

@pytest.mark.parametrize("kw,words", [
    ({"num_heads": 5}, ["num_heads", "divisor of d_model 16", "4"]),
    ({"norm": "middle"}, ["norm", "pre", "post"]),
    ({"activation": "tanh"}, ["activation", "relu"]),
    ({"dropout": 1.5}, ["dropout", "[0, 1)"]),
    ({"ffn": 0}, ["ffn", "positive integer"]),
    ({"eps": -1}, ["eps", "positive"]),
    ({"bias": "no"}, ["bias", "True or False"]),
    ({"key_channels": 8}, ["key_channels", "sets it itself"]),
    ({"colour": "red"}, ["colour"]),
])
def test_bad_arguments_are_named(kw, words):
    args = {"d_model": D, "num_heads": H, "ffn": F, **kw}
    with pytest.raises(al.ArgumentError) as e:
        al.blocks.transformer_encoder(**args)
    for w in words:
        assert w in str(e.value)


def test_a_wrong_input_width_names_the_block():
    net = al.Network([L.SequenceInput(D + 2), al.blocks.transformer_encoder(D, H, F)])
    issues = net.analyze().issues
    assert issues and "encoder" in str(issues[0])


def test_gelu_activation_equals_torch():
    net, ref = encoder_pair("pre", activation="gelu")
    ref.activation = nn.functional.gelu
    net.eval(), ref.eval()
    x = torch.randn(2, 4, D)
    close(net(x), ref(x))
    assert al.blocks.transformer_encoder(D, H, F, activation="silu").layers[
        "activation"].type_name == "SiLU"


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_without_biases_equals_torch(norm):
    torch.manual_seed(0)
    net = al.Network()
    net.add(L.SequenceInput(D, name="tgt"))
    net.add(L.SequenceInput(D, name="mem"))
    net.add(al.blocks.transformer_decoder(D, H, F, norm=norm, bias=False))
    net.connect("tgt", "decoder/in")
    net.connect("mem", "decoder/memory")
    ref = nn.TransformerDecoderLayer(D, H, F, batch_first=True, norm_first=norm == "pre",
                                     bias=False)
    assert not [n for n in net.learnables if n.endswith("bias")]
    assert net.analyze().total_learnables == sum(p.numel() for p in ref.parameters())
    dst = net.learnables
    with torch.no_grad():
        for att in ("self_attn", "multihead_attn"):
            mha = getattr(ref, att)
            for i, part in enumerate(("query", "key", "value")):
                dst[f"decoder/{att}/{part}.weight"].copy_(mha.in_proj_weight[i * D:(i + 1) * D])
            dst[f"decoder/{att}/output.weight"].copy_(mha.out_proj.weight)
        for m in ("linear1", "linear2", "norm1", "norm2", "norm3"):
            dst[f"decoder/{m}/weight"].copy_(getattr(ref, m).weight)
    net.eval(), ref.eval()
    tgt, mem = torch.randn(2, 5, D), torch.randn(2, 3, D)
    close(net({"tgt": tgt, "mem": mem}), ref(tgt, mem, tgt_mask=causal(5)))


def test_grouped_heads_and_rotary_pass_through():
    blk = al.blocks.transformer_encoder(D, H, F, causal=True, num_kv_heads=2, rotary=True)
    assert blk.layers["self_attn"].num_kv_heads == 2 and blk.layers["self_attn"].rotary
    net = al.Network([L.SequenceInput(D), blk]).eval()
    x = torch.randn(2, 6, D)
    full = net(x)
    s = net.stream()
    close(torch.cat([s.step(x[:, t:t + 1]) for t in range(6)], 1), full)
