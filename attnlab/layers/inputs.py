"""Input layers: where data enters a network. Their module is the identity."""
from __future__ import annotations

from torch import nn

from attnlab.core.spec import Spec
from attnlab.core import checks as check
from .base import Layer


class _Input(Layer):
    input_ports = ()
    is_input = True

    @property
    def spec(self) -> Spec:
        """The spec of the data this input accepts."""
        raise NotImplementedError

    def build(self, specs: dict[str, Spec]) -> nn.Module:
        return nn.Identity()

    def infer(self, specs: dict[str, Spec]) -> Spec:
        return self.spec


class SequenceInput(_Input):
    """Where sequences enter the network [sequenceInputLayer].

    The data is B×T×C: a tensor, an array, or a list of T_i×C sequences of different lengths
    (padded, with a padding mask that travels with the activations).

    Parameters
    ----------
    channels : int
        The features per time step, C.
    length : int, optional
        T, when every sequence has this known length; None (the default) leaves T symbolic.

    Shape
    -----
    - `out`: B×T×channels (no input port)

    Examples
    --------
    >>> import torch, attnlab as al
    >>> from attnlab import layers as L
    >>> net = al.Network([L.SequenceInput(3, name="x"), L.Dense(2)])
    >>> net(torch.randn(4, 10, 3)).shape
    torch.Size([4, 10, 2])
    """

    stem = "input"

    def __init__(self, channels: int, length: int | None = None, name: str | None = None):
        super().__init__(name)
        self.channels = check.integer(self, "channels", channels, example=1)
        self.length = check.integer(self, "length", length, none_ok=True)

    @property
    def spec(self) -> Spec:
        """The spec of the data this input accepts."""
        return Spec.sequence(self.channels, self.length)


class ImageInput(_Input):
    """Where images enter the network [imageInputLayer], in PyTorch's layout B×C×H×W.

    Parameters
    ----------
    size : tuple of int
        Three ints (channels, height, width), e.g. ``(1, 28, 28)`` for grey 28×28 images.

    Shape
    -----
    - `out`: B×C×H×W (no input port)

    Examples
    --------
    >>> import attnlab as al
    >>> from attnlab import layers as L
    >>> L.ImageInput((3, 32, 32)).spec
    Spec(B×3×32×32)
    """

    stem = "input"

    def __init__(self, size: tuple[int, int, int] | list[int], name: str | None = None):
        super().__init__(name)
        fix = "For a 28×28 grey image use ImageInput((1, 28, 28)); for RGB, (3, H, W)."
        if not isinstance(size, (tuple, list)) or len(size) != 3:
            raise check.fail(self, "size", "(channels, height, width): 3 positive ints", size, fix)
        self.size = tuple(check.integer(self, f"size[{i}] ({what})", s, example=28 if i else 1)
                          for i, (s, what) in enumerate(zip(size, ("channels", "height", "width"))))

    @property
    def spec(self) -> Spec:
        """The spec of the data this input accepts."""
        return Spec.image(*self.size)

    def config(self) -> dict:
        return {"size": list(self.size)}


class FeatureInput(_Input):
    """Where feature vectors enter the network [featureInputLayer].

    Parameters
    ----------
    channels : int
        The features per observation, C.

    Shape
    -----
    - `out`: B×channels (no input port)
    """

    stem = "input"

    def __init__(self, channels: int, name: str | None = None):
        super().__init__(name)
        self.channels = check.integer(self, "channels", channels, example=4)

    @property
    def spec(self) -> Spec:
        """The spec of the data this input accepts."""
        return Spec.features(self.channels)



class TokenInput(_Input):
    """Where token ids enter the network: B×T integers, as Hugging Face's `input_ids`.

    The ids stay int64 whatever the network's dtype (a network moved to bfloat16 still looks up
    id 50001, not the 49920 that bfloat16 would round it to). The data is a B×T integer tensor
    or array, `al.Padded(ids, mask)` (B×T or B×T×1 ids, the mask B×T), or a list of 1-D id
    sequences of different lengths (padded, with a padding mask that travels with the
    activations, e.g. to attention's keys). Whole-number floats are read as ids; fractional
    ones are a DataError. `Embedding` reads it; streaming (`net.stream().step(ids)`, B×t ids
    per step) and `al.generate` feed it ids.

    Parameters
    ----------
    length : int, optional
        T, when every sequence has this known length; None (the default) leaves T symbolic.

    Shape
    -----
    - `out`: B×T token ids, int64 (no input port)

    Examples
    --------
    >>> import torch, attnlab as al
    >>> from attnlab import layers as L
    >>> net = al.Network([L.TokenInput(name="input_ids"), L.Embedding(100, 4)])
    >>> net(torch.tensor([[5, 7, 99]])).shape
    torch.Size([1, 3, 4])
    """

    stem = "tokens"

    def __init__(self, length: int | None = None, name: str | None = None):
        super().__init__(name)
        if isinstance(length, str):
            raise check.fail(self, "length", "an int ≥ 1 or None (the default)", length,
                             f"The name is given by keyword: TokenInput(name={length!r}).")
        self.length = check.integer(self, "length", length, none_ok=True, example=128)

    @property
    def spec(self) -> Spec:
        """The spec of the data this input accepts (B×T token ids)."""
        return Spec("BT", (None, self.length))
