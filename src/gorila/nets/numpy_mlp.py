"""A plain MLP's forward pass in numpy, on the flat parameter vector of the torch network it
mirrors, so that a process that only plays a small vector-observation network greedily (the
evaluator of a CartPole run) never imports torch (about 150 MiB of memory per process)::

    net = NumpyMLP((4, 64, 64, 2))     # widths: observation, hidden..., actions
    net.set(flat)                      # the server's vector, in FlatParams' order
    actions = net.greedy(obs_batch)    # argmax per row

    policy = NumpyMLP((4, 64, 64, 2), activation="tanh", total=8964)   # an actor-critic's policy
    policy.set(flat)                   # the whole vector: the policy is its first ``size`` entries

The layout is ``nn.Linear``'s, layer by layer: weight ``(out, in)`` then bias, the activation after
every layer but the last (:func:`gorila.nets.mlp.mlp`). Which torch networks are such an MLP is said
on the torch side: :func:`gorila.nets.q.numpy_q_network` (a plain Q-network, ReLU) and
:func:`gorila.nets.actor_critic.numpy_mlp_policy` (an MLP actor-critic's policy head, tanh, ahead of its
value network in the vector). No torch here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ACTIVATIONS = {"relu": lambda x: np.maximum(x, 0.0, out=x), "tanh": lambda x: np.tanh(x, out=x)}


class NumpyMLP:
    """See the module doc. ``size`` is the MLP's own parameter count; ``total`` the length of the
    flat vector :meth:`set` takes (the MLP's entries first; by default ``size``). Unset, it pickles
    small: builders hand one to the evaluator's factory."""

    def __init__(self, widths: Sequence[int], activation: str = "relu", total: int | None = None):
        if len(widths) < 2:
            raise ValueError(f"an MLP needs an input and an output width, got {tuple(widths)}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.widths, self.activation = tuple(int(w) for w in widths), activation
        self.size = sum(n_out * n_in + n_out for n_in, n_out in zip(self.widths, self.widths[1:]))
        self.total = self.size if total is None else int(total)
        if self.total < self.size:
            raise ValueError(f"a vector of {self.total} parameters cannot hold an MLP of {self.size}")
        self.layers: list[tuple[np.ndarray, np.ndarray]] = []

    def set(self, flat: np.ndarray) -> None:
        """Load the parameters from ``flat`` (copied)."""
        flat = np.asarray(flat, np.float32)
        if flat.shape != (self.total,):
            raise ValueError(f"expected {self.total} parameters for widths {self.widths}, got {flat.shape}")
        layers, at = [], 0
        for n_in, n_out in zip(self.widths, self.widths[1:]):
            weight = flat[at:at + n_out * n_in].reshape(n_out, n_in)
            at += n_out * n_in
            layers.append((np.ascontiguousarray(weight.T), flat[at:at + n_out].copy()))  # x @ W.T + b
            at += n_out
        self.layers = layers

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """The outputs (Q-values, or logits) of a batch of observations, each flattened and cast to float32."""
        x = np.asarray(obs).reshape(len(obs), -1).astype(np.float32, copy=False)
        activate = ACTIVATIONS[self.activation]
        for k, (weight_t, bias) in enumerate(self.layers):
            x = x @ weight_t + bias
            if k < len(self.layers) - 1:
                activate(x)
        return x

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        """The argmax action of each observation."""
        return self(obs).argmax(1)
