"""A plain MLP's forward pass in numpy, on the flat parameter vector of the torch MLP it mirrors,
so that a process that only plays a small vector-observation Q-network greedily (the evaluator of
a CartPole run) never imports torch (about 150 MiB of memory per process)::

    net = NumpyMLP((4, 64, 64, 2))     # widths: observation, hidden..., actions
    net.set(flat)                      # the server's vector, in FlatParams' order
    actions = net.greedy(obs_batch)    # argmax-Q per row

The layout is ``nn.Linear``'s, layer by layer: weight ``(out, in)`` then bias, a ReLU after every
layer but the last (:func:`gorila.nets.mlp.mlp`); :func:`gorila.nets.q.mlp_widths` says whether a
torch Q-network is such an MLP. No torch here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class NumpyMLP:
    """See the module doc; ``size`` is the length of the flat vector :meth:`set` takes."""

    def __init__(self, widths: Sequence[int]):
        if len(widths) < 2:
            raise ValueError(f"an MLP needs an input and an output width, got {tuple(widths)}")
        self.widths = tuple(int(w) for w in widths)
        self.size = sum(n_out * n_in + n_out for n_in, n_out in zip(self.widths, self.widths[1:]))
        self.layers: list[tuple[np.ndarray, np.ndarray]] = []

    def set(self, flat: np.ndarray) -> None:
        """Load the parameters from ``flat`` (copied)."""
        flat = np.asarray(flat, np.float32)
        if flat.shape != (self.size,):
            raise ValueError(f"expected {self.size} parameters for widths {self.widths}, got {flat.shape}")
        layers, at = [], 0
        for n_in, n_out in zip(self.widths, self.widths[1:]):
            weight = flat[at:at + n_out * n_in].reshape(n_out, n_in)
            at += n_out * n_in
            layers.append((np.ascontiguousarray(weight.T), flat[at:at + n_out].copy()))  # x @ W.T + b
            at += n_out
        self.layers = layers

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """The outputs (Q-values) of a batch of observations, each flattened and cast to float32."""
        x = np.asarray(obs).reshape(len(obs), -1).astype(np.float32, copy=False)
        for k, (weight_t, bias) in enumerate(self.layers):
            x = x @ weight_t + bias
            if k < len(self.layers) - 1:
                np.maximum(x, 0.0, out=x)
        return x

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        """The argmax-Q action of each observation."""
        return self(obs).argmax(1)
