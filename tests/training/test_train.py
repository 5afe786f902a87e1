"""al.train: options, the self-attention acceptance test, losses, metrics, schedules, early
stopping, divergence, progress output and plots."""
import copy
import math
import os
import sys

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

import attnlab as al
from attnlab import layers as L
from attnlab.training import plots as plots_mod
from attnlab.training.optim import make_optimizer, param_groups
from train_worker import attention_classifier, lstm_classifier, separable

QUIET = dict(verbose=False)


pytestmark = pytest.mark.usefixtures("one_thread")


# ----------------------------------------------------------------------- options ---

def test_options_defaults_follow_matlab():
    o = al.TrainingOptions()
    assert (o.solver, o.lr, o.momentum, o.shuffle, o.validation_frequency) == \
        ("sgdm", 0.01, 0.9, "every-epoch", 50)
    assert (o.max_epochs, o.batch_size, o.l2, o.seed, o.gradient_threshold) == (30, 128, 0.0, 0, None)
    assert (o.checkpoint_frequency, o.checkpoint_frequency_unit, o.resume) == (1, "epoch", False)
    for solver in ("adam", "adamw", "rmsprop"):
        assert al.TrainingOptions(solver=solver).lr == 0.001
    assert al.TrainingOptions(solver="adam", learning_rate=0.5).lr == 0.5


def test_options_are_checked_with_suggestions():
    with pytest.raises(al.ArgumentError, match="'adam'"):
        al.TrainingOptions(solver="adm")
    with pytest.raises(al.ArgumentError, match="every-epoch"):
        al.TrainingOptions(shuffle="each")
    with pytest.raises(al.ArgumentError, match="batch_size"):
        al.TrainingOptions(batch_size=0)
    with pytest.raises(al.ArgumentError, match="checkpoint_dir"):
        al.TrainingOptions(resume=True)
    x, y = separable(8)
    with pytest.raises(al.ArgumentError, match="max_epochs"):
        al.train(attention_classifier(), x, y, max_epoch=3)
    with pytest.raises(al.ArgumentError, match="crossentropy"):
        al.train(attention_classifier(), x, y, loss="crossentropi", **QUIET)


# -------------------------------------------------------------------- acceptance ---

def test_self_attention_classifier_reaches_95_percent_validation_accuracy():
    x, y = separable(360, t=12)
    net = attention_classifier()
    assert any(l.type_name == "SelfAttention" for l in net.layers)
    opts = al.TrainingOptions(solver="adam", learning_rate=0.01, max_epochs=6, batch_size=32,
                              validation_data=(x[300:], y[300:]), validation_frequency=20, **QUIET)
    info = al.train(net, x[:300], y[:300], loss="crossentropy", options=opts)
    assert info.validation["accuracy"][-1] > 0.95, info.validation
    assert info.elapsed_s > 0
    assert (torch.as_tensor(al.classify(net, x[300:])) == y[300:]).float().mean() > 0.95
    # the Softmax is back after training: predict gives probabilities
    p = net.predict(x[:5])
    assert torch.allclose(p.sum(1), torch.ones(5))
    assert set(info.epochs) >= {"epoch", "loss", "accuracy", "val_loss", "val_accuracy"}
    assert info.epochs["epoch"] == [1, 2, 3, 4, 5, 6]
    assert len(info.iterations["loss"]) == info.iterations["iteration"][-1] == 6 * 10
    assert info.history["val_accuracy"][-1] == info.validation["accuracy"][-1]


def test_label_values_are_kept_and_returned_by_classify():
    x, y = separable(150)
    names = np.array(["cat", "dog", "eel"])[y.numpy()]
    net = lstm_classifier()
    al.train(net, x, list(names), solver="adam", learning_rate=0.02, max_epochs=6, batch_size=16,
             **QUIET)
    assert net.metadata["class_labels"] == ["cat", "dog", "eel"]
    got = al.classify(net, x)
    assert got.dtype.kind == "U" and set(got) <= {"cat", "dog", "eel"}
    assert (got == names).mean() > 0.8


def test_integer_labels_that_are_not_indices_are_mapped():
    x, y = separable(90)
    values = torch.tensor([10, 20, 30])[y]
    net = lstm_classifier()
    al.train(net, x, values, max_epochs=1, batch_size=30, **QUIET)
    assert net.metadata["class_labels"] == [10, 20, 30]
    assert set(al.classify(net, x).tolist()) <= {10, 20, 30}


def test_retraining_on_new_classes_says_where_the_old_ones_live():
    x, y = separable(30)
    net = lstm_classifier()
    al.train(net, x, np.array(["a", "b", "c"])[y.numpy()], max_epochs=1, **QUIET)
    with pytest.raises(al.DataError, match=r"'z'.*net.metadata\['class_labels'\]"):
        al.train(net, x, np.array(["a", "b", "z"])[y.numpy()], max_epochs=1, **QUIET)
    del net.metadata["class_labels"]
    al.train(net, x, np.array(["a", "b", "z"])[y.numpy()], max_epochs=1, **QUIET)
    assert net.metadata["class_labels"] == ["a", "b", "z"]


def test_integer_indices_are_used_as_they_are():
    x, y = separable(60)
    net = lstm_classifier()
    al.train(net, x, y.numpy(), max_epochs=1, batch_size=30, **QUIET)
    assert "class_labels" not in net.metadata
    assert al.classify(net, x).dtype == np.int64


# ------------------------------------------------------------------------ losses ---

def _one_step(net, x, y, loss, **kw):
    """Loss of the first iteration (no weight change matters: lr is tiny)."""
    opts = dict(solver="sgdm", learning_rate=1e-12, max_epochs=1, batch_size=len(x),
                shuffle="never", **QUIET)
    opts.update(kw)
    return al.train(net, x, y, loss=loss, **opts)


def test_crossentropy_after_softmax_is_finite_for_huge_logits():
    net = al.Network([L.FeatureInput(4), L.Dense(3, name="fc"), L.Softmax(name="softmax")])
    net.initialize()
    with torch.no_grad():
        net.learnables["fc/weight"].mul_(1e4)                # logits ~1e4: softmax saturates
    x = torch.randn(16, 4)
    y = torch.randint(0, 3, (16,))
    with torch.no_grad():
        logits = net.layer_modules["fc"](x)
        naive = -torch.log(torch.softmax(logits, 1))[torch.arange(16), y].mean()
    assert not torch.isfinite(naive)                       # log of a saturated softmax
    info = _one_step(net, x, y, "crossentropy")
    expected = F.cross_entropy(logits, y).item()
    assert math.isfinite(info.iterations["loss"][0])
    assert info.iterations["loss"][0] == pytest.approx(expected, rel=1e-5)
    assert all(torch.isfinite(p).all() for p in net.parameters())


def test_binary_crossentropy_after_sigmoid_uses_logits():
    net = al.Network([L.FeatureInput(3), L.Dense(1, name="fc"), L.Sigmoid(name="sig")])
    net.initialize()
    with torch.no_grad():
        net.learnables["fc/weight"].mul_(1e3)
    x = torch.randn(12, 3)
    y = (x[:, :1] > 0).float()
    logits = net.layer_modules["fc"](x).detach()
    info = _one_step(net, x, y, "binary-crossentropy")
    assert info.iterations["loss"][0] == pytest.approx(
        F.binary_cross_entropy_with_logits(logits, y).item(), rel=1e-5)
    assert info.iterations["accuracy"][0] == pytest.approx(((logits > 0) == (y > 0.5)).float().mean().item())


@pytest.mark.parametrize("loss,ref", [("mse", F.mse_loss), ("mae", F.l1_loss),
                                      ("huber", F.huber_loss)])
def test_regression_losses_match_torch(loss, ref):
    net = al.Network([L.FeatureInput(3), L.Dense(2, name="fc")])
    net.initialize()
    x, y = torch.randn(10, 3), torch.randn(10, 2)
    out = net(x).detach()
    info = _one_step(net, x, y, loss, metrics=["rmse", "mae"])
    assert info.iterations["loss"][0] == pytest.approx(ref(out, y).item(), rel=1e-5)
    assert info.iterations["rmse"][0] == pytest.approx(F.mse_loss(out, y).sqrt().item(), rel=1e-5)
    assert info.iterations["mae"][0] == pytest.approx(F.l1_loss(out, y).item(), rel=1e-5)


def test_callable_loss_and_metric():
    net = al.Network([L.FeatureInput(3), L.Dense(1, name="fc")])
    net.initialize()
    x, y = torch.randn(10, 3), torch.randn(10)               # N targets for one channel
    out = net(x).detach()

    def cubic(o, t):
        return (o - t).abs().pow(3).mean()

    def bias(o, t):
        return (o - t).mean()
    info = _one_step(net, x, y, cubic, metrics=[bias])
    assert info.iterations["loss"][0] == pytest.approx(cubic(out, y[:, None]).item(), rel=1e-5)
    assert info.iterations["bias"][0] == pytest.approx(bias(out, y[:, None]).item(), rel=1e-5)


def test_l2_decays_weights_not_biases():
    net = lstm_classifier()
    net.initialize()
    opt = make_optimizer(list(net.parameters()), al.TrainingOptions(l2=1e-3))
    decayed = {id(p) for g in opt.param_groups if g["weight_decay"] for p in g["params"]}
    assert decayed == {id(p) for p in net.parameters() if p.dim() >= 2}


@pytest.mark.parametrize("solver", ["adam", "adamw"])
def test_adam_is_fused_and_agrees_with_the_loop_over_parameters(solver):
    net = lstm_classifier()
    net.initialize()
    o = al.TrainingOptions(solver=solver, l2=1e-2, learning_rate=1e-2)
    twin = copy.deepcopy(net)
    opt = make_optimizer(list(net.parameters()), o)
    assert opt.defaults["fused"] is True
    cls = torch.optim.Adam if solver == "adam" else torch.optim.AdamW
    ref = cls(param_groups(list(twin.parameters()), 1e-2, 1e-2), lr=1e-2,
              foreach=False)                       # torch's loop over the parameters
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):                             # the same gradients into both
        for p, q in zip(net.parameters(), twin.parameters()):
            p.grad = torch.randn(p.shape, generator=gen)
            q.grad = p.grad.clone()
        opt.step()
        ref.step()
    for (name, p), q in zip(net.named_parameters(), twin.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=name)


def test_adam_loops_over_parameters_where_no_fused_kernel_takes_them():
    from attnlab.training.optim import fusable
    floats = [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2, 2))]
    assert fusable(floats)
    assert not fusable([torch.nn.Parameter(torch.zeros(2, dtype=torch.complex64))])
    assert not fusable([torch.nn.Parameter(torch.zeros(2, device="meta"))])
    assert not fusable([*floats, torch.nn.Parameter(torch.zeros(2, device="meta"))])
    opt = make_optimizer([torch.nn.Parameter(torch.zeros(2, dtype=torch.complex64))],
                         al.TrainingOptions(solver="adam"))
    assert not opt.defaults["fused"]


# ------------------------------------------------------------ schedules, clipping ---

def test_schedules_follow_torch():
    x, y = separable(40)
    info = al.train(lstm_classifier(), x, y, solver="sgdm", max_epochs=4, batch_size=10,
                    learning_rate_schedule="piecewise", learning_rate_drop_period=2,
                    learning_rate_drop_factor=0.5, **QUIET)
    assert info.iterations["learning_rate"][::4] == pytest.approx([0.01, 0.01, 0.005, 0.005])
    info = al.train(lstm_classifier(), x, y, solver="adam", max_epochs=2, batch_size=10,
                    learning_rate_schedule="warmup-cosine", warmup_iterations=3, **QUIET)
    lr = info.iterations["learning_rate"]
    assert lr[0] == pytest.approx(1e-5) and lr[3] == pytest.approx(1e-3) and lr[-1] < 2e-4
    info = al.train(lstm_classifier(), x, y, max_epochs=2, batch_size=10, learning_rate_schedule="cosine",
                    **QUIET)
    lr = info.iterations["learning_rate"]
    assert lr[0] == pytest.approx(0.01) and lr[4] == pytest.approx(0.005) and lr[-1] < 4e-4
    info = al.train(lstm_classifier(), x, y, max_epochs=1, batch_size=10, learning_rate_schedule="warmup",
                    warmup_iterations=2, warmup_fraction=0.5, **QUIET)
    assert info.iterations["learning_rate"] == pytest.approx([0.005, 0.0075, 0.01, 0.01])
    info = al.train(lstm_classifier(), x, y, max_epochs=1, batch_size=10, schedule_step="iteration",
                    learning_rate_schedule=lambda opt: torch.optim.lr_scheduler.ExponentialLR(opt, 0.5),
                    **QUIET)
    assert info.iterations["learning_rate"] == pytest.approx([0.01, 0.005, 0.0025, 0.00125])


def test_gradient_threshold_bounds_the_first_update():
    x, y = separable(32)
    net = lstm_classifier()
    net.initialize()
    before = torch.cat([p.detach().flatten().clone() for p in net.parameters()])
    al.train(net, x, y * 1, solver="sgdm", learning_rate=1.0, max_epochs=1, batch_size=32,
             gradient_threshold=0.01, **QUIET)
    after = torch.cat([p.detach().flatten() for p in net.parameters()])
    assert (after - before).norm() <= 1.0 * 0.01 + 1e-6


# ---------------------------------------------------------- early stopping, stop ---

def test_validation_patience_stops_and_restores_the_best_weights():
    torch.manual_seed(1)
    x = torch.randn(64, 3)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5]])
    net = al.Network([L.FeatureInput(3), L.Dense(1, name="fc")])
    # validation targets are the opposite: the better training fits, the worse validation gets
    info = al.train(net, x, y, loss="mse", solver="sgdm", learning_rate=0.05, max_epochs=50,
                    batch_size=16, validation_data=(x, -y), validation_frequency=2,
                    validation_patience=3, **QUIET)
    assert info.stop_reason == "validation-patience"
    assert len(info.validation["loss"]) == 4 and info.best_iteration == 2
    final = F.mse_loss(net(x), -y).item()
    assert final == pytest.approx(info.best_validation_loss, rel=1e-5)
    assert info.validation["loss"][0] == pytest.approx(info.best_validation_loss)


def test_output_fn_can_stop_training():
    x, y = separable(40)
    seen = []

    def fn(state):
        seen.append((state.epoch, state.iteration, round(state.loss, 6)))
        return state.iteration == 3
    info = al.train(lstm_classifier(), x, y, max_epochs=5, batch_size=10, output_fn=fn, **QUIET)
    assert info.stop_reason == "output-function"
    assert [s[1] for s in seen] == [1, 2, 3]
    assert [s[2] for s in seen] == [round(v, 6) for v in info.iterations["loss"]]


# --------------------------------------------------------------------- divergence ---

class Explode(nn.Module):
    """Identity for 4 training calls, then multiplies by inf."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        if self.training:
            self.calls += 1
        return x * float("inf") if self.calls > 4 else x


def _exploding_net():
    return al.Network([L.FeatureInput(3), L.Dense(4, name="fc1"), L.Module(Explode(), name="boom"),
                       L.ReLU(name="relu"), L.Dense(2, name="fc2")])


def test_nonfinite_loss_names_the_iteration():
    x, y = torch.randn(40, 3), torch.randint(0, 2, (40,))
    with pytest.raises(al.TrainingError, match=r"iteration 5 \(epoch 2\).*check_finite=True"):
        al.train(_exploding_net(), x, y, max_epochs=5, batch_size=10, verbose_frequency=50, **QUIET)


def test_check_finite_names_the_first_nonfinite_layer():
    x, y = torch.randn(40, 3), torch.randint(0, 2, (40,))
    net = _exploding_net()
    with pytest.raises(al.TrainingError, match=r"iteration 5 .*layer 'boom'") as e:
        al.train(net, x, y, max_epochs=5, batch_size=10, check_finite=True, **QUIET)
    assert e.value.iteration == 5 and e.value.layer == "boom"
    assert all(torch.isfinite(p).all() for p in net.parameters())   # stopped before the update


# -------------------------------------------------------------- progress, plots ---

def test_plain_progress_lines_when_not_a_terminal(capsys):
    x, y = separable(40)
    al.train(lstm_classifier(), x, y, max_epochs=2, batch_size=10, verbose_frequency=2,
             validation_data=(x, y), validation_frequency=4)
    out = capsys.readouterr().out
    assert "learnables" in out and "parameters): 2 epoch(s), 8 iteration(s)" in out
    assert "epoch 1/2  iteration 2/8" in out and "loss" in out and "accuracy" in out
    assert "val_loss" in out and "done: max-epochs" in out
    assert "\x1b[" not in out                                      # plain text


def test_training_progress_plot_is_written_and_refreshed(tmp_path, monkeypatch):
    calls = []
    real = plots_mod.draw
    monkeypatch.setattr(plots_mod, "draw", lambda info, path: calls.append(path) or real(info, path))
    x, y = separable(40)
    info = al.train(lstm_classifier(), x, y, max_epochs=2, batch_size=10, plots="training-progress",
                    log_dir=str(tmp_path), validation_data=(x, y), validation_frequency=4,
                    verbose_frequency=2, **QUIET)
    png = tmp_path / "training-progress.png"
    assert info.plot_file == str(png) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(calls) >= 2                                         # during training and at the end
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_tensorboard_logs_when_installed(tmp_path):
    pytest.importorskip("tensorboard")
    x, y = separable(20)
    al.train(lstm_classifier(), x, y, max_epochs=1, batch_size=10, log_dir=str(tmp_path), **QUIET)
    assert any(p.name.startswith("events.out.tfevents") for p in tmp_path.iterdir())


# ---------------------------------------------------------------------- hot path ---

HOST_READS = ("item", "tolist", "cpu", "__bool__", "__float__", "__int__", "numpy", "nonzero")
ATTNLAB_DIR = os.path.dirname(os.path.abspath(al.__file__)) + os.sep


def count_host_reads(monkeypatch) -> list:
    """Patches the Tensor methods that read values back on the host (item, tolist, cpu, bool,
    float, int, numpy, nonzero) to record each call made from attnlab's own code: frames whose
    file lies in the installed package's folder (wherever it is installed), or in code the
    package generated (the forward plan, stream steps)."""
    calls = []
    for name in HOST_READS:
        real = getattr(torch.Tensor, name)

        def wrapper(self, *a, _real=real, _name=name, **k):
            caller = sys._getframe(1).f_code.co_filename
            if caller.startswith(ATTNLAB_DIR) or caller.startswith("<attnlab"):
                calls.append(_name)
            return _real(self, *a, **k)
        monkeypatch.setattr(torch.Tensor, name, wrapper)
    return calls


def test_no_host_reads_per_step(monkeypatch):
    """Between logging points a step reads nothing back from its tensors: the calls that would
    (item, tolist, cpu, bool, float, int, numpy, nonzero) made from attnlab code grow per epoch (the epoch's flush and order), not per iteration;
    the same under bf16 autocast."""
    calls = count_host_reads(monkeypatch)
    x, y = separable(400, t=10)
    xs = [xi[: 3 + i % 7] for i, xi in enumerate(x)]              # padded batches with masks
    for precision in ("fp32", "bf16"):
        counts = []
        for epochs in (1, 3):
            net = attention_classifier()
            net.initialize()
            calls.clear()
            al.train(net, xs, y, solver="adam", max_epochs=epochs, batch_size=16,
                     verbose_frequency=1000, precision=precision, **QUIET)
            counts.append(len(calls))
        assert counts[0] > 0                  # the patch sees attnlab's reads (the epoch's flush)
        assert counts[1] - counts[0] <= 2 * 3, (precision, calls)  # 50 more iterations


def test_no_host_reads_per_decoding_step(monkeypatch):
    """A stream step reads nothing back; generate asks whether every sequence stopped once
    every 8 tokens only."""
    net = al.Network([L.SequenceInput(1, name="tok"), L.Embedding(12, 8, name="embed"),
                      L.SinusoidalPositionEncoding(8, name="pos"), L.Addition(2, name="add"),
                      L.SelfAttention(2, 8, attention_mask="causal", name="attn"),
                      L.LSTM(8, name="lstm"), L.Dense(12, name="scores")])
    net.connect("embed", "add/in2")
    net.initialize().eval()
    s = net.stream(capacity=4)                    # the cache doubles on the way: no reads either
    calls = count_host_reads(monkeypatch)
    x = torch.zeros(2, 1, 1)
    s.step(torch.zeros(2, 3, 1))                  # a prefill
    for _ in range(20):
        x = s.step(x)[:, -1].argmax(-1).float().view(-1, 1, 1)
    assert calls == []
    # the static-shape step that compile=True traces (run eagerly here) reads nothing either
    from attnlab.stream.core import Stream
    from attnlab.stream.program import build_program
    spec = net._input_specs[0]
    static = Stream(net, build_program(net, {}, 4, static_shapes=True), [spec], None,
                    torch.float32)
    static.step(torch.zeros(2, 3, 1))
    x = torch.zeros(2, 1, 1)
    for _ in range(20):                           # the caches double on the way
        x = static.step(x)[:, -1].argmax(-1).float().view(-1, 1, 1)
    assert calls == [] and static.steppers["attn"].cache.capacity == 32
    free = al.generate(net, start=0, max_new_tokens=32).tokens[0].tolist()
    stop = min(set(range(12)) - set(free))        # an id of the vocabulary never produced
    calls.clear()
    al.generate(net, start=0, stop=stop, max_new_tokens=32)
    assert calls.count("__bool__") == 32 // 8 and len(calls) <= 32 // 8 + 2, calls


def test_rich_progress_bar_in_a_terminal():
    import io
    from rich.console import Console
    from attnlab.training.progress import Bar
    buf = io.StringIO()
    bar = Bar(Console(file=buf, force_terminal=True, width=120))
    bar.start(total=4, epochs=2)
    for i in range(1, 5):
        bar.advance(i, (i - 1) // 2)
    bar.log({"iteration": 4, "epoch": 2, "loss": 0.25, "accuracy": 0.9, "learning_rate": 0.01})
    bar.validation({"iteration": 4, "epoch": 2, "loss": 0.3, "accuracy": 0.8})
    bar.close()
    out = buf.getvalue()
    assert "epoch 2/2" in out and "4/4" in out and "loss 0.25" in out and "val_loss 0.3" in out
