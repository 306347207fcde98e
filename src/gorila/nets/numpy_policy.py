"""An actor-critic's policy played in numpy where the network has a numpy twin, and the sampler
actors that hold the torch network draw their actions with.

An actor steps a few envs at a time, and at that batch torch's cost per operation, not the
arithmetic, is most of a small network's forward pass (``docs/benchmarks.md``). So where the
network is an MLP actor-critic (:func:`~gorila.nets.actor_critic.numpy_mlp_policy`) or MinAtar's
(:func:`~gorila.nets.minatar.numpy_minatar`), its policy is played in numpy
(:class:`~gorila.nets.numpy_sampler.NumpySampler`); any other network (the Nature CNN, a Gaussian
policy) through its torch head.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from gorila.nets.actor_critic import numpy_mlp_policy
from gorila.nets.heads import CategoricalHead, GaussianHead
from gorila.nets.minatar import numpy_minatar
from gorila.nets.numpy_conv import NumpyNetwork
from gorila.nets.numpy_sampler import NumpySampler


def numpy_policy(net: nn.Module) -> NumpyNetwork | None:
    """The policy (logits) of an actor-critic as an unset numpy network taking its whole flat vector,
    or None where it has no numpy twin::

        policy = numpy_policy(net)      # unset: builders hand it to the actors and the evaluator
        policy.set(FlatParams(net).get()); policy.greedy(obs)
    """
    mlp = numpy_mlp_policy(net)
    return mlp if mlp is not None else numpy_minatar(net)


class PolicySampler:
    """Draws an action per observation from pi(.|obs) of an actor-critic (``net.head``'s distribution)::

        sampler = PolicySampler(net, seed=1003)
        sampler.set(flat)                 # the vector, loaded into net too unless sampler.in_numpy
        actions = sampler.sample(obs)     # (N,) int64, or (N, size) float32 for a Gaussian head
        actions, log_probs = sampler.sample_with_log_prob(obs)   # and log pi(a|obs) of each, float32

    A policy with a numpy twin (:func:`numpy_policy`; ``in_numpy``) is played by a
    :class:`~gorila.nets.numpy_sampler.NumpySampler`. Any other network samples through its head in
    torch from ``net``'s own parameters, which its user loads. Either way the draws come from a
    generator seeded with ``seed``, and the log-probability is of the action as drawn (a Gaussian's
    unclipped)."""

    def __init__(self, net: nn.Module, seed: int):
        self.net = net
        self.head: CategoricalHead | GaussianHead = getattr(net, "head")  # every actor-critic has one
        policy = numpy_policy(net)
        self.numpy = None if policy is None else NumpySampler(policy, seed)
        self.generator = torch.Generator().manual_seed(seed)

    @property
    def in_numpy(self) -> bool:
        """Whether the draws are made in numpy (then ``net``'s own parameters are never read)."""
        return self.numpy is not None

    def set(self, flat: np.ndarray) -> None:
        if self.numpy is not None:
            self.numpy.set(flat)

    def sample(self, obs: np.ndarray) -> np.ndarray:
        if self.numpy is not None:
            return self.numpy.sample(obs)
        with torch.no_grad():
            out, _ = self.net(torch.as_tensor(obs, dtype=torch.float32))
            actions: np.ndarray = self.head.sample(out, self.generator)[0].numpy()
            return actions

    def sample_with_log_prob(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.numpy is not None:
            return self.numpy.sample_with_log_prob(obs)
        with torch.no_grad():
            out, _ = self.net(torch.as_tensor(obs, dtype=torch.float32))
            chosen, log_probs = self.head.sample(out, self.generator)
            return chosen.numpy(), log_probs.numpy()
