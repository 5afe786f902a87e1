"""Training throughput: `al.train` against a hand-written torch loop on the same model and data,
and against Keras 3 `fit` (torch backend) when keras is installed, in one run, interleaved.

Model: an LSTM + self-attention sequence classifier — SequenceInput(12) → LSTM(64) →
SelfAttention(4 heads, 64) → GlobalAvgPool1d → Dense(5) → Softmax — on B32 × T30 × C12
batches. Each timed call trains `EPOCHS` epochs of 1280 observations (40 iterations each) with
Adam, shuffling every epoch, from a fresh optimizer, as each contender does when called:
  - al.train with its defaults (progress off): the training accuracy is computed every step, the
    final Softmax is bypassed for a stable crossentropy, checks run before training; and again
    with metrics=[] (no accuracy, like the hand loop);
  - the hand loop: randperm, index, zero_grad, F.cross_entropy on logits, backward, step;
  - Keras: `model.fit(x, y, batch_size=32, epochs=EPOCHS, shuffle=True)` with accuracy.
Result: iterations per second; ratio = al.train's rate / the hand loop's (≥ 0.95 is the target).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "torch")          # before keras is imported

import torch                                             # noqa: E402
from torch import nn                                     # noqa: E402
from torch.nn import functional as F                     # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import attnlab as al                                     # noqa: E402
from attnlab import layers as L                          # noqa: E402
from _common import interleaved, machine, write_section  # noqa: E402

B, T, C, HIDDEN, HEADS, CLASSES, N = 32, 30, 12, 64, 4, 5, 1280
EPOCHS = 3


def data(seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, CLASSES, (N,), generator=g)
    x = torch.randn(N, T, C, generator=g)
    x[torch.arange(N), :, y] += 0.5
    return x, y


def attnlab_net() -> al.Network:
    return al.Network([L.SequenceInput(C, name="in"), L.LSTM(HIDDEN, name="lstm"),
                       L.SelfAttention(HEADS, HIDDEN, name="attn"), L.GlobalAvgPool1d(name="pool"),
                       L.Dense(CLASSES, name="fc"), L.Softmax(name="softmax")]).initialize()


class Hand(nn.Module):
    """The same network written by hand, returning logits."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(C, HIDDEN, batch_first=True)
        self.query, self.key, self.value, self.output = (nn.Linear(HIDDEN, HIDDEN) for _ in range(4))
        self.fc = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        h = self.lstm(x)[0]                                               # B×T×H
        b, t, c = h.shape

        def heads(z):
            return z.view(b, t, HEADS, c // HEADS).transpose(1, 2)        # B×heads×T×dk
        a = F.scaled_dot_product_attention(heads(self.query(h)), heads(self.key(h)),
                                           heads(self.value(h)))
        a = self.output(a.transpose(1, 2).reshape(b, t, c))               # B×T×H
        return self.fc(a.mean(1))                                         # B×classes


def hand_copy(net: al.Network) -> Hand:
    hand = Hand()
    with torch.no_grad():
        for name, p in hand.named_parameters():
            layer = {"lstm": "lstm", "fc": "fc"}.get(name.split(".")[0], "attn")
            key = name.partition(".")[2] if layer != "attn" else name
            p.copy_(net.learnables[f"{layer}/{key}"])
    return hand


def hand_training(model: Hand, x, y):
    def run():
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        running = torch.zeros(())
        for _ in range(EPOCHS):
            perm = torch.randperm(N)
            for i in range(0, N, B):
                idx = perm[i:i + B]
                opt.zero_grad(set_to_none=True)
                loss = F.cross_entropy(model(x[idx]), y[idx])
                loss.backward()
                opt.step()
                running += loss.detach()
        return running.item()
    return run


def attnlab_training(net: al.Network, x, y, **kw):
    opts = al.TrainingOptions(solver="adam", learning_rate=1e-3, max_epochs=EPOCHS, batch_size=B,
                              verbose=False, **kw)

    def run():
        return al.train(net, x, y, loss="crossentropy", options=opts)
    return run


def keras_training(x, y):
    try:
        import keras
    except ImportError:
        return None
    if keras.backend.backend() != "torch":
        return None
    from keras import layers as kl
    inp = keras.Input((T, C))
    h = kl.LSTM(HIDDEN, return_sequences=True)(inp)
    a = kl.MultiHeadAttention(HEADS, HIDDEN // HEADS)(h, h)
    out = kl.Dense(CLASSES, activation="softmax")(kl.GlobalAveragePooling1D()(a))
    model = keras.Model(inp, out)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    xn, yn = x.numpy(), y.numpy()

    def run():
        return model.fit(xn, yn, batch_size=B, epochs=EPOCHS, shuffle=True, verbose=0)
    return run, keras.__version__


def measure(threads: int, repeats: int):
    """One interleaved comparison at `threads` torch threads → (rates, keras version or None)."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    x, y = data()
    net = attnlab_net()
    hand = hand_copy(net)
    with torch.no_grad():
        torch.testing.assert_close(torch.softmax(hand(x[:B]), 1), net(x[:B]), atol=1e-5, rtol=1e-5)
    fns = {"al.train": attnlab_training(net, x, y), "hand loop": hand_training(hand, x, y),
           "al.train, metrics=[]": attnlab_training(net, x, y, metrics=[])}
    k = keras_training(x, y)
    if k is not None:
        fns["keras fit"] = k[0]
    t = interleaved(fns, iters=1, repeats=repeats, warmup=1)
    steps = EPOCHS * (N // B)
    return {name: steps / s for name, s in t.items()}, (k[1] if k else None)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", default="1", help="torch thread counts to measure, e.g. 1,2 "
                    "(on a shared 2-core machine two threads mostly measure the other load)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    repeats = 3 if args.quick else 9
    lines = ["## Training throughput (`benchmarks/training.py`)", ""]
    for threads in [int(t) for t in args.threads.split(",")]:
        rate, kv = measure(threads, repeats)
        lines += [f"LSTM(64) + self-attention (4 heads) sequence classifier, B{B} T{T} C{C}, "
                  f"{CLASSES} classes, Adam; each call trains {EPOCHS} epochs × {N // B} iterations "
                  f"from a fresh optimizer; median of {repeats} interleaved calls; {machine()}"
                  + (f", keras {kv} (torch backend)" if kv else ", keras not installed") + ".", "",
                  "| trainer | iterations/s | ms/iteration | rate / hand loop's |",
                  "|---|---|---|---|"]
        for name, r in rate.items():
            lines.append(f"| {name} | {r:.1f} | {1e3 / r:.2f} | {r / rate['hand loop']:.3f} |")
        lines.append("")
    lines += ["al.train runs with its defaults (progress off): training accuracy every step, the "
              "final Softmax bypassed for the loss, data checks before the first step; "
              "`metrics=[]` drops the accuracy, which the hand loop does not compute. Keras `fit` "
              "is the same model (LSTM, MultiHeadAttention, GlobalAveragePooling1D, Dense softmax) "
              "with accuracy."]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_write:
        write_section("training", text)


if __name__ == "__main__":
    main()
