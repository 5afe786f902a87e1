"""One contract over every layer type: build, inferred = actual sizes, parameter count, backward."""
import pytest
import torch
from torch import nn

from attnlab import layers as L
from attnlab.combinators import Pick, Port
from attnlab.matlab import mlayers as ML          # MATLAB's image-sequence layers
from attnlab.core.spec import Spec

from helpers import ID_LAYERS, concrete, data_for, single_layer_net

seq = Spec.sequence
img = Spec.image
feat = Spec.features

# layer factory, input specs by port, learnables count (None: no parameters), token vocab
CASES = {
    "Dense": [(lambda: L.Dense(5), {"in": seq(4)}, 4 * 5 + 5),
              (lambda: L.Dense(5), {"in": feat(4)}, 25),
              (lambda: L.Dense(5, bias=False), {"in": img(2, 3, 3)}, 18 * 5)],
    "ReLU": [(lambda: L.ReLU(), {"in": img(2, 4, 4)}, 0)],
    "LeakyReLU": [(lambda: L.LeakyReLU(0.2), {"in": seq(3)}, 0)],
    "GELU": [(lambda: L.GELU(), {"in": seq(3)}, 0),
             (lambda: L.GELU(approximate="tanh"), {"in": img(2, 3, 3)}, 0)],
    "SiLU": [(lambda: L.SiLU(), {"in": seq(3)}, 0)],
    "Tanh": [(lambda: L.Tanh(), {"in": feat(3)}, 0)],
    "Sigmoid": [(lambda: L.Sigmoid(), {"in": feat(3)}, 0)],
    "Softmax": [(lambda: L.Softmax(), {"in": seq(3)}, 0), (lambda: L.Softmax(), {"in": img(3, 2, 2)}, 0)],
    "Dropout": [(lambda: L.Dropout(0.3), {"in": seq(3)}, 0)],
    "Conv1d": [(lambda: L.Conv1d(3, 6), {"in": seq(4)}, 4 * 6 * 3 + 6),
               (lambda: L.Conv1d(3, 6, stride=2, padding="causal"), {"in": seq(4)}, 78),
               (lambda: L.Conv1d(2, 6, padding="valid", dilation=2), {"in": seq(4)}, 4 * 6 * 2 + 6)],
    "Conv2d": [(lambda: L.Conv2d(3, 8), {"in": img(2, 7, 7)}, 2 * 8 * 9 + 8),
               (lambda: L.Conv2d(3, 8, stride=2), {"in": img(2, 7, 7)}, 152),
               (lambda: L.Conv2d((3, 1), 4, padding="valid"), {"in": img(2, 7, 5)}, 2 * 4 * 3 + 4),
               (lambda: L.Conv2d(3, 4, padding=1), {"in": img(2, 5, 5)}, 2 * 4 * 9 + 4)],
    "LSTM": [(lambda: L.LSTM(5), {"in": seq(3)}, 4 * 5 * (3 + 5) + 8 * 5),
             (lambda: L.LSTM(5, output_mode="last", bidirectional=True), {"in": seq(3)}, 2 * 200),
             (lambda: L.LSTM(5, has_state_inputs=True, has_state_outputs=True),
              {"in": seq(3), "hidden": feat(5), "cell": feat(5)}, 200)],
    "GRU": [(lambda: L.GRU(5), {"in": seq(3)}, 3 * 5 * (3 + 5) + 6 * 5),
            (lambda: L.GRU(5, output_mode="last", has_state_outputs=True), {"in": seq(3)}, 150)],
    "LayerNorm": [(lambda: L.LayerNorm(), {"in": seq(4)}, 8), (lambda: L.LayerNorm(), {"in": img(3, 4, 4)}, 6),
                  (lambda: L.LayerNorm(eps=1e-12, bias=False), {"in": seq(4)}, 4),
                  (lambda: L.LayerNorm(bias=False), {"in": img(3, 4, 4)}, 3)],
    "RMSNorm": [(lambda: L.RMSNorm(), {"in": seq(4)}, 4), (lambda: L.RMSNorm(1e-5), {"in": feat(3)}, 3)],
    "GLU": [(lambda: L.GLU(5), {"in": seq(4)}, 2 * 5 * 4),
            (lambda: L.GLU(5, activation="gelu-tanh", bias=True), {"in": feat(4)}, 2 * (5 * 4 + 5))],
    # router 4×4, each expert gate and up 6×4 and down 4×6
    "MixtureOfExperts": [(lambda: L.MixtureOfExperts(4, 6), {"in": seq(4)}, 4 * 4 + 4 * 3 * 6 * 4),
                         (lambda: L.MixtureOfExperts(3, 5, top_k=3, activation="gelu"),
                          {"in": feat(4)}, 3 * 4 + 3 * 3 * 5 * 4)],
    "BatchNorm": [(lambda: L.BatchNorm(), {"in": img(3, 4, 4)}, 6), (lambda: L.BatchNorm(), {"in": seq(3)}, 6),
                  (lambda: L.BatchNorm(), {"in": feat(3)}, 6)],
    "MaxPool2d": [(lambda: L.MaxPool2d(2), {"in": img(3, 7, 7)}, 0)],
    "AvgPool2d": [(lambda: L.AvgPool2d(3, stride=1, padding=1), {"in": img(3, 5, 5)}, 0)],
    "GlobalAvgPool1d": [(lambda: L.GlobalAvgPool1d(), {"in": seq(3)}, 0)],
    "GlobalMaxPool1d": [(lambda: L.GlobalMaxPool1d(), {"in": seq(3)}, 0)],
    "GlobalAvgPool2d": [(lambda: L.GlobalAvgPool2d(), {"in": img(3, 4, 4)}, 0)],
    "GlobalMaxPool2d": [(lambda: L.GlobalMaxPool2d(), {"in": img(3, 4, 4)}, 0)],
    "Flatten": [(lambda: L.Flatten(), {"in": img(3, 4, 4)}, 0), (lambda: L.Flatten(), {"in": feat(3)}, 0)],
    "Index1d": [(lambda: L.Index1d("last"), {"in": seq(3)}, 0), (lambda: L.Index1d(2), {"in": seq(3)}, 0),
                (lambda: L.Index1d("first"), {"in": seq(3)}, 0)],
    "LastToken": [(lambda: L.LastToken(0), {"in": seq(3), "ids": seq(1)}, 0),
                  (lambda: L.LastToken(), {"in": seq(3), "ids": seq(1)}, 0)],
    "SelectChannel": [(lambda: L.SelectChannel(1), {"in": seq(3)}, 0),
                      (lambda: L.SelectChannel(-1), {"in": seq(2)}, 0)],
    "Addition": [(lambda: L.Addition(3), {"in1": seq(4), "in2": seq(4), "in3": seq(4)}, 0)],
    "Multiplication": [(lambda: L.Multiplication(2), {"in1": feat(4), "in2": feat(4)}, 0)],
    "Concatenation": [(lambda: L.Concatenation(2), {"in1": seq(4), "in2": seq(3)}, 0),
                      (lambda: L.Concatenation(2, dim="time"), {"in1": seq(4), "in2": seq(4)}, 0),
                      (lambda: L.Concatenation(2), {"in1": img(2, 3, 3), "in2": img(1, 3, 3)}, 0)],
    "Embedding": [(lambda: L.Embedding(10, 4), {"in": seq(1)}, 40)],
    "Attention": [(lambda: L.Attention(2), {"query": seq(4), "key": seq(4), "value": seq(6)}, 0),
                  (lambda: L.Attention(2, attention_mask="causal", has_scores_output=True,
                                       has_padding_mask_input=True),
                   {"query": seq(4), "key": seq(4), "value": seq(4), "mask": seq(1)}, 0),
                  (lambda: L.Attention(2, num_kv_heads=1, rotary=True, attention_mask="causal",
                                       window=2, alibi=True, has_bias_input=True),
                   {"query": seq(4), "key": seq(2), "value": seq(3), "bias": img(1, 6, 6)}, 0)],
    "SelfAttention": [(lambda: L.SelfAttention(2, 8), {"in": seq(4)}, 156),
                      (lambda: L.SelfAttention(2, 8, value_channels=6, output_channels=5,
                                               attention_mask="causal", has_scores_output=True,
                                               has_padding_mask_input=True),
                       {"in": seq(4), "mask": seq(1)}, 145),
                      (lambda: L.SelfAttention(4, 8, num_kv_heads=2), {"in": seq(4)}, 116),
                      (lambda: L.SelfAttention(4, 16, num_kv_heads=2, rotary=True,
                                               projection_bias=False), {"in": seq(4)}, 192),
                      (lambda: L.SelfAttention(2, 8, attention_mask="causal", window=3, alibi=True,
                                               has_bias_input=True),
                       {"in": seq(4), "bias": img(2, 6, 6)}, 156)],
    "MultiHeadAttention": [(lambda: L.MultiHeadAttention(2, 8), {"query": seq(4), "key": seq(6), "value": seq(3)}, 164),
                           (lambda: L.MultiHeadAttention(2, 8, attention_mask="causal", causal_alignment="bottom-right",
                                                         has_scores_output=True, has_padding_mask_input=True),
                            {"query": seq(4), "key": seq(4), "value": seq(4), "mask": seq(1)}, 156),
                           (lambda: L.MultiHeadAttention(2, 8, rotary={"fraction": 0.5}, projection_bias=False,
                                                         has_bias_input=True),
                            {"query": seq(4), "key": seq(6), "value": seq(3), "bias": img(2, 6, 6)}, 136)],
    "AttentionPool1d": [(lambda: L.AttentionPool1d(2), {"in": seq(4)}, 64)],
    "ImageToSequence": [(lambda: L.ImageToSequence(), {"in": img(3, 4, 6)}, 0),
                        (lambda: L.ImageToSequence(2), {"in": img(3, 4, 6)}, 0)],
    "PositionEmbedding": [(lambda: L.PositionEmbedding(10), {"in": seq(4)}, 40),
                          (lambda: L.PositionEmbedding(10, channels=3), {"in": seq(4)}, 30)],
    "SinusoidalPositionEncoding": [(lambda: L.SinusoidalPositionEncoding(5), {"in": seq(4)}, 0)],
    "TokenPositionEmbedding": [(lambda: L.TokenPositionEmbedding(10, 4, padding_idx=1),
                                {"in": seq(1)}, 40)],
    "RelativePositionBias": [(lambda: L.RelativePositionBias(2, 8, 16), {"query": seq(4), "key": seq(3)}, 16),
                             (lambda: L.RelativePositionBias(3, 6, 20, bidirectional=False),
                              {"query": seq(4), "key": seq(4)}, 18)],
    "Module": [(lambda: L.Module(nn.Linear(4, 3)), {"in": seq(4)}, 15),
               (lambda: L.Module(nn.Conv2d(2, 3, 3)), {"in": img(2, 5, 5)}, 57)],
    "Port": [(lambda: Port(), {"in": seq(3)}, 0)],
    "Pick": [(lambda: Pick([1, 0, 0], n_in=2), {"in1": seq(4), "in2": feat(3)}, 0)],
    "SequenceInput": [], "ImageInput": [], "FeatureInput": [],   # exercised by every case above
    "TokenInput": [],            # B×T ids: tests/layers/test_transformer_layers.py
    "Network": [],                                               # tests/network/test_network.py
    "InputNormalization": [(lambda: L.InputNormalization("zscore"), {"in": seq(3)}, 0),
                           (lambda: L.InputNormalization("rescale-zero-one", min=0, max=[1, 2]),
                            {"in": img(2, 3, 3)}, 0)],
    "Pool1d": [(lambda: L.Pool1d("max", 2, 2), {"in": seq(3)}, 0),
               (lambda: L.Pool1d("average", 3, 1, "same"), {"in": seq(3)}, 0)],
    "Scaling": [(lambda: L.Scaling([1, 2, 3], 0.5), {"in": seq(3)}, 0)],
    "Identity": [(lambda: L.Identity(), {"in": feat(3)}, 0)],
    "GroupedConv2d": [(lambda: L.GroupedConv2d(3, 2, None, padding="same"), {"in": img(4, 5, 5)}, 80),
                      (lambda: L.GroupedConv2d(3, 3, 2, stride=2), {"in": img(4, 5, 5)}, 114)],
    "PatchEmbedding": [(lambda: L.PatchEmbedding((2, 2), 5), {"in": img(3, 4, 4)}, 65),
                       (lambda: L.PatchEmbedding(2, 5, "row-major"), {"in": img(3, 4, 6)}, 65)],
    "EmbeddingConcatenation": [(lambda: L.EmbeddingConcatenation(), {"in": seq(3)}, 3)],
    "Swish": [(lambda: L.Swish(), {"in": seq(3)}, 0)],
    "TanhGELU": [(lambda: L.TanhGELU(), {"in": img(2, 3, 3)}, 0)],
    "SpatialDropout": [(lambda: L.SpatialDropout(0.3), {"in": seq(3)}, 0),
                       (lambda: L.SpatialDropout(0.5), {"in": img(2, 3, 3)}, 0)],
    "FrameFlatten": [(lambda: ML.FrameFlatten((2, 2, 1)), {"in": seq(4)}, 0)],
    # folding puts the time steps into the batch (B·T images from a B-batch), which this
    # contract's batch-B shapes cannot express: the pair runs the same checks together in
    # tests/matlab/test_matlab_folding.py::test_unfold_is_contract_clean_with_its_fold
    "WordEmbedding": [(lambda: ML.WordEmbedding(10, 4), {"in": seq(1)}, 40)],
    "SequenceFolding": [],
    "SequenceUnfolding": [],
    "GroupNorm": [(lambda: L.GroupNorm(2), {"in": img(4, 3, 3)}, 8),
                  (lambda: L.GroupNorm("channel-wise"), {"in": seq(3)}, 6),
                  (lambda: L.GroupNorm(1, positions=False), {"in": img(2, 3, 3)}, 4),
                  (lambda: L.GroupNorm("all-channels", eps=1e-3), {"in": feat(3)}, 6)],
    "ELU": [(lambda: ML.ELU(0.5), {"in": seq(3)}, 0)],
    "ClippedReLU": [(lambda: ML.ClippedReLU(6), {"in": img(2, 3, 3)}, 0)],
    "Softplus": [(lambda: ML.Softplus(), {"in": feat(3)}, 0)],
    "CrossChannelNormalization": [(lambda: ML.CrossChannelNormalization(3), {"in": img(4, 3, 3)}, 0),
                                  (lambda: ML.CrossChannelNormalization(2), {"in": seq(4)}, 0)],
    "Resize2d": [(lambda: ML.Resize2d(scale=2), {"in": img(2, 3, 3)}, 0),
                 (lambda: ML.Resize2d(size=(5, 4), method="bilinear"), {"in": img(2, 3, 3)}, 0)],
    "MatlabConcatenation": [(lambda: ML.MatlabConcatenation(2, 1), {"in1": seq(4), "in2": seq(3)}, 0),
                            (lambda: ML.MatlabConcatenation(2, 3), {"in1": seq(4), "in2": seq(4)}, 0),
                            (lambda: ML.MatlabConcatenation(2, 3), {"in1": img(2, 3, 3),
                                                                    "in2": img(1, 3, 3)}, 0)],
}

ALL = [(t, i, c) for t, cases in CASES.items() for i, c in enumerate(cases)]


def test_every_layer_type_has_a_case():
    # the package's own kinds: test modules define kinds of their own (registered on import)
    ours = {n for n, c in L.LAYER_TYPES.items() if c.__module__.partition(".")[0] == "attnlab"}
    missing = sorted(ours - set(CASES))
    assert not missing, f"add contract cases for {missing}"


@pytest.mark.parametrize("type_name,i,case", ALL, ids=[f"{t}-{i}" for t, i, _ in ALL])
def test_layer_contract(type_name, i, case):
    factory, in_specs, n_params = case
    layer = factory()
    assert type(layer).__name__ == type_name
    # fixed-length sequences, so that inference must get the time axis right too
    in_specs = {p: Spec.sequence(s.channels, 6) if s.is_sequence else s for p, s in in_specs.items()}
    net = single_layer_net(layer, in_specs)
    analysis = net.analyze()
    assert analysis.ok, analysis
    net.initialize()
    assert analysis.total_learnables == n_params
    assert sum(p.numel() for p in net.parameters()) == n_params
    assert sum(p.numel() for p in net.learnables.values()) == n_params

    ints = 10 if type_name in ID_LAYERS else None
    xs = {f"x_{p}": data_for(s, ints=ints) for p, s in in_specs.items()}
    for x in xs.values():
        x.requires_grad_(ints is None)
    out = net(xs)
    outs = out if isinstance(out, dict) else {net.output_names[0]: out}
    inferred = analysis.out_specs[layer.name]
    for port, spec in inferred.items():
        name = layer.name if len(layer.output_ports) == 1 else f"{layer.name}/{port}"
        got = outs[name]
        assert tuple(got.shape) == concrete(spec), (port, spec, got.shape)
    loss = sum(o.float().pow(2).mean() for o in outs.values())
    if loss.requires_grad:                  # a position encoding depends on no learnable or input
        loss.backward()
    for p in net.parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all()
