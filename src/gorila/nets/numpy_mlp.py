"""A plain MLP's forward pass in numpy, on the flat parameter vector of the torch network it
mirrors, so that a process that only plays a small vector-observation network greedily (the
evaluator of a CartPole run) never imports torch (about 150 MiB of memory per process)::

    net = NumpyMLP((4, 64, 64, 2))     # widths: observation, hidden..., actions
    net.set(flat)                      # the server's vector, in FlatParams' order
    actions = net.greedy(obs_batch)    # argmax per row

    policy = NumpyMLP((4, 64, 64, 2), activation="tanh", total=8964)   # an actor-critic's policy
    policy.set(flat)                   # the whole vector: the policy is its first ``size`` entries

    gaussian = NumpyGaussian(NumpyMLP((3, 64, 64, 1), "tanh", total=8963, offset=1), log_std_at=0)
    gaussian.set(flat); mean = gaussian.greedy(obs_batch)   # a Gaussian policy's mean, its log-std beside

The layout is ``nn.Linear``'s, layer by layer: weight ``(out, in)`` then bias, the activation after
every layer but the last (:func:`gorila.nets.mlp.mlp`). Which torch networks are such an MLP is said
on the torch side: :func:`gorila.nets.q.numpy_q_network` (a plain Q-network, ReLU) and
:func:`gorila.nets.actor_critic.numpy_mlp_policy` (an MLP actor-critic's policy head, tanh, ahead of its
value network in the vector; a Gaussian policy's as a :class:`NumpyGaussian`). :class:`NumpyDueling`
plays a dueling Q-network (an MLP's, MinAtar's) as one such network with its two streams side by
side. No torch here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from gorila.nets.numpy_conv import NumpyNetwork

# each activation works in place on its argument
ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "relu": lambda x: np.maximum(x, 0.0, out=x), "tanh": lambda x: np.tanh(x, out=x)}


class NumpyMLP:
    """See the module doc. ``size`` is the MLP's own parameter count; ``total`` the length of the
    flat vector :meth:`set` takes, whose entries from ``offset`` on are the MLP's (by default the
    whole vector: ``size`` entries from 0). Unset, it pickles small: builders hand one to the
    evaluator's factory."""

    def __init__(self, widths: Sequence[int], activation: str = "relu", total: int | None = None, offset: int = 0):
        if len(widths) < 2:
            raise ValueError(f"an MLP needs an input and an output width, got {tuple(widths)}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.widths, self.activation = tuple(int(w) for w in widths), activation
        self.size, self.offset = mlp_size(self.widths), int(offset)
        self.total = self.size if total is None else int(total)
        if self.offset < 0 or self.total < self.offset + self.size:
            raise ValueError(f"a vector of {self.total} parameters cannot hold an MLP of {self.size} "
                             f"from entry {self.offset}")
        self.layers: list[tuple[np.ndarray, np.ndarray]] = []

    def set(self, flat: np.ndarray) -> None:
        """Load the parameters from ``flat`` (copied)."""
        flat = np.asarray(flat, np.float32)
        if flat.shape != (self.total,):
            raise ValueError(f"expected {self.total} parameters for widths {self.widths}, got {flat.shape}")
        layers, at = [], self.offset
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


class NumpyGaussian:
    """A diagonal Gaussian policy in numpy (:class:`~gorila.nets.heads.GaussianHead`'s): ``mean``, an
    MLP giving the mean, and a state-independent log standard deviation read from the same flat
    vector at ``log_std_at`` (see the module doc). A call gives what the torch network's policy
    output is, the mean and the log-std side by side; :meth:`greedy` the mean, the action the
    evaluation plays (the env clips it to its bounds); :meth:`draw` samples actions with their
    log-probabilities. Unset, it pickles small."""

    def __init__(self, mean: NumpyMLP, log_std_at: int):
        self.mean, self.log_std_at = mean, int(log_std_at)
        self.size = mean.widths[-1]
        self.total = mean.total
        if not 0 <= self.log_std_at <= self.total - self.size:
            raise ValueError(f"a vector of {self.total} parameters has no log-std of {self.size} at {log_std_at}")
        self.log_std = self.std = np.zeros(self.size, np.float32)

    def set(self, flat: np.ndarray) -> None:
        """Load the parameters from ``flat`` (copied)."""
        self.mean.set(flat)
        self.log_std = np.asarray(flat, np.float32)[self.log_std_at:self.log_std_at + self.size].copy()
        self.std = np.exp(self.log_std)  # once a load, not once a step

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        mean = self.mean(obs)
        return np.concatenate([mean, np.broadcast_to(self.log_std, mean.shape)], axis=1)

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        """The mean action of each observation, float32 ``(N, size)``."""
        return self.mean(obs)

    def draw(self, obs: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``(actions, log_probs)``: ``mean + exp(log_std) * noise`` with standard normal noise from
        ``rng``, and log N(action; mean, std) of each, float32 (the sample as drawn, unclipped)."""
        mean = self.mean(obs)
        noise = rng.standard_normal(mean.shape, dtype=np.float32)
        actions = mean + self.std * noise
        # the standardised action is the noise itself, as in GaussianHead.sample
        log_probs = (-0.5 * noise * noise - self.log_std - np.float32(_HALF_LOG_2PI)).sum(axis=1)
        return actions, log_probs.astype(np.float32, copy=False)


_HALF_LOG_2PI = 0.5 * float(np.log(2.0 * np.pi))


def mlp_size(widths: Sequence[int]) -> int:
    """Parameters of the MLP of ``widths``: a weight and a bias per layer."""
    return sum(n_out * n_in + n_out for n_in, n_out in zip(widths, widths[1:]))


def _layers(flat: np.ndarray, widths: Sequence[int]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(weight (out, in), bias)`` of each layer of an MLP of ``widths`` laid out in ``flat``: views."""
    at = 0
    for n_in, n_out in zip(widths, widths[1:]):
        yield flat[at:at + n_out * n_in].reshape(n_out, n_in), flat[at + n_out * n_in:at + n_out * (n_in + 1)]
        at += n_out * (n_in + 1)


class NumpyDueling:
    """A dueling Q-network (Wang et al. 2016) in numpy: ``Q = V + A - mean_a A`` over a torso's
    features, on the flat vector of the torch network (the torso's entries, then the value stream's
    MLP, then the advantage stream's, each ``nn.Linear``'s layout)::

        net = NumpyDueling(NumpyMLP((4, 64, 128, 3)), torso=320, value=(64, 64, 1), advantage=(64, 64, 2))
        net.set(flat)                      # the torch network's vector
        q = net(obs_batch); actions = net.greedy(obs_batch)

    The two streams run as one network, ``inner`` (a :class:`NumpyMLP` or a
    :class:`~gorila.nets.numpy_conv.NumpyMinAtarNet` over the same torso): their first layers
    stacked, each later layer block-diagonal, so a forward pass costs the operations of a plain
    network's, and its outputs are ``V`` then ``A``. :meth:`set` lays the vector out that way for
    ``inner``; ``torso`` counts the torso's entries, which both vectors begin with.
    :func:`gorila.nets.q.numpy_q_network` builds one from the torch network; unset, it pickles small."""

    def __init__(self, inner: NumpyNetwork, torso: int, value: Sequence[int], advantage: Sequence[int]):
        if len(value) != len(advantage) or value[0] != advantage[0] or value[-1] != 1:
            raise ValueError(f"streams {tuple(value)} and {tuple(advantage)} do not make a dueling head")
        self.inner, self.torso = inner, int(torso)
        self.value, self.advantage = tuple(int(w) for w in value), tuple(int(w) for w in advantage)
        self.size = self.total = self.torso + mlp_size(self.value) + mlp_size(self.advantage)

    def set(self, flat: np.ndarray) -> None:
        """Load the parameters from the torch network's ``flat`` (copied)."""
        flat = np.asarray(flat, np.float32)
        if flat.shape != (self.total,):
            raise ValueError(f"expected {self.total} parameters, got {flat.shape}")
        at = self.torso + mlp_size(self.value)
        parts = [flat[:self.torso]]
        streams = zip(_layers(flat[self.torso:at], self.value), _layers(flat[at:], self.advantage))
        for k, ((value_w, value_b), (advantage_w, advantage_b)) in enumerate(streams):
            if k == 0:  # both read the torso's features
                weight = np.concatenate([value_w, advantage_w])
            else:  # each reads its own stream's units
                weight = np.zeros((len(value_w) + len(advantage_w), value_w.shape[1] + advantage_w.shape[1]),
                                  np.float32)
                weight[:len(value_w), :value_w.shape[1]] = value_w
                weight[len(value_w):, value_w.shape[1]:] = advantage_w
            parts += [weight.reshape(-1), value_b, advantage_b]
        self.inner.set(np.concatenate(parts))

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """The Q-values of a batch of observations, float32."""
        out = self.inner(obs)
        advantage = out[:, 1:]
        q = out[:, :1] + advantage  # in torch's order: V + A, then the mean subtracted
        q -= advantage.mean(axis=1, keepdims=True)
        return q

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        """The argmax action of each observation."""
        actions: np.ndarray = self(obs).argmax(1)
        return actions
