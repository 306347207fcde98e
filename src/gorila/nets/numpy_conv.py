"""MinAtar's network (one 3×3 convolution, then linear layers) forward in numpy, on the flat
parameter vector of the torch network it mirrors::

    net = NumpyMinAtarNet(in_channels=4, widths=(128, 3), total=flat.size)   # Breakout's policy
    net.set(flat)                      # the server's vector, in FlatParams' order
    logits = net(obs_batch)            # (B, 4, 10, 10) booleans -> (B, 3)
    actions = net.greedy(obs_batch)

An actor steps a few envs at a time: at 8 observations torch's per-operation cost, not the
arithmetic, is most of a forward pass of this small network (``docs/benchmarks.md``), so actors and
the evaluator play it here. The convolution is one matrix product over the 3×3 patches, gathered
from each observation by one ``np.take``. Which torch networks are such a network is said on the
torch side (:func:`gorila.nets.minatar.numpy_minatar`). No torch here.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

KERNEL = 3


class NumpyNetwork(Protocol):
    """What plays a network's greedy policy (or samples from its logits) without torch: an unset
    instance pickles small, :meth:`set` loads the flat vector, a call gives the outputs of a batch."""

    def set(self, flat: np.ndarray) -> None: ...
    def __call__(self, obs: np.ndarray) -> np.ndarray: ...
    def greedy(self, obs: np.ndarray) -> np.ndarray: ...


class NumpyMinAtarNet:
    """See the module doc. conv ``filters`` 3×3 stride 1 → ReLU → flatten → a linear layer per entry
    of ``widths``, ReLU between them. ``total`` is the length of the vector :meth:`set` takes: the
    network's own entries come first, in ``nn.Conv2d``'s then ``nn.Linear``'s layout (weight, then
    bias), anything after them (an actor-critic's value head) is not read."""

    def __init__(self, in_channels: int, widths: tuple[int, ...], image_size: tuple[int, int] = (10, 10),
                 filters: int = 16, total: int | None = None):
        if not widths:
            raise ValueError("the network needs at least one linear layer after its convolution")
        self.in_channels, self.filters, self.image_size = int(in_channels), int(filters), tuple(image_size)
        self.out_size = (self.image_size[0] - KERNEL + 1, self.image_size[1] - KERNEL + 1)
        features = self.filters * self.out_size[0] * self.out_size[1]
        self.widths = (features, *(int(w) for w in widths))
        conv = self.filters * self.in_channels * KERNEL * KERNEL + self.filters
        self.size = conv + sum(n_out * n_in + n_out for n_in, n_out in zip(self.widths, self.widths[1:]))
        self.total = self.size if total is None else int(total)
        if self.total < self.size:
            raise ValueError(f"a vector of {self.total} parameters cannot hold a network of {self.size}")
        # Where each output position's 3×3 patch (channel, row, column order, as torch's kernels) sits
        # in a flattened observation, a column per position: gathering them is one np.take.
        height, width = self.image_size
        rows, cols = np.meshgrid(np.arange(self.out_size[0]), np.arange(self.out_size[1]), indexing="ij")
        offsets = (np.arange(self.in_channels)[:, None, None] * height * width
                   + np.arange(KERNEL)[None, :, None] * width + np.arange(KERNEL)[None, None, :]).reshape(-1)
        self.patches = ((rows.reshape(-1, 1) * width + cols.reshape(-1, 1)) + offsets[None, :]).T.copy()
        self.kernel: np.ndarray = np.zeros((0, 0), np.float32)
        self.layers: list[tuple[np.ndarray, np.ndarray]] = []

    def set(self, flat: np.ndarray) -> None:
        """Load the parameters from ``flat`` (copied)."""
        flat = np.asarray(flat, np.float32)
        if flat.shape != (self.total,):
            raise ValueError(f"expected {self.total} parameters, got {flat.shape}")
        patch = self.in_channels * KERNEL * KERNEL
        at = self.filters * patch
        # (filters, C, 3, 3) -> (filters, C·3·3): times a column of patch values, every filter's response.
        self.kernel = flat[:at].reshape(self.filters, patch).copy()
        self.kernel_bias = flat[at:at + self.filters].copy()
        at += self.filters
        layers = []
        for n_in, n_out in zip(self.widths, self.widths[1:]):
            # Kept in torch's (out, in) layout, which a product with its transpose reads as it is: a
            # transposed copy of the first layer (128 × 1024 on MinAtar) cost most of a load.
            layers.append((flat[at:at + n_out * n_in].reshape(n_out, n_in).copy(),
                           flat[at + n_out * n_in:at + n_out * n_in + n_out].copy()))
            at += n_out * n_in + n_out
        self.layers = layers

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """The outputs (logits, or Q-values) of a batch of ``(C, H, W)`` observations, cast to float32."""
        x = np.asarray(obs)
        batch = len(x)
        # Every layer runs on columns, one per observation: (out, in) @ (in, B) reads each weight in
        # torch's layout as it is (a product with a transposed weight took twice as long here), and
        # the convolution's output comes out in torch's (filters, H', W') order, the first layer's.
        columns = np.take(x.reshape(batch, -1).T, self.patches, axis=0)  # (C·3·3, H'·W', B)
        h = self.kernel @ columns.reshape(len(columns), -1).astype(np.float32, copy=False)  # (filters, H'·W'·B)
        h += self.kernel_bias[:, None]
        np.maximum(h, 0.0, out=h)
        h = h.reshape(-1, batch)
        for k, (weight, bias) in enumerate(self.layers):
            h = weight @ h
            h += bias[:, None]
            if k < len(self.layers) - 1:
                np.maximum(h, 0.0, out=h)
        return np.ascontiguousarray(h.T)

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        """The argmax action of each observation."""
        actions: np.ndarray = self(obs).argmax(1)
        return actions
