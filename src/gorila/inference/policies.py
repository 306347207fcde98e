"""The policies an inference server runs: a network on a device, loaded from flat parameters.

Both are built in the server's process from a picklable ``network_fn``::

    greedy = GreedyQPolicy(network_fn, device="cuda")       # Q-networks: the argmax (actors add ε)
    sampled = SampledPolicy(network_fn, device="cpu", seed=0)  # actor-critics: a ~ pi(.|s)
    greedy.load(flat_params); sampled.load(flat_params)
    actions = greedy(obs)                                    # int64, one per observation
    actions, log_probs = sampled(obs)                        # and log pi(a|s) of each, float32
                                                             # (Box actions: float32 vectors, unclipped)
    recurrent = RecurrentSampledPolicy(network_fn, seed=0)   # --core lstm: each env's core state in and out
    actions, log_probs, state = recurrent(obs, state, starts)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from gorila.nets import FlatParams
from gorila.nets.heads import ActionHead
from gorila.nets.inputs import observation_tensor


class _NetworkPolicy:
    def __init__(self, network_fn: Callable[[], nn.Module], device: str = "cpu") -> None:
        self.device = torch.device(device)
        self.net = network_fn().to(self.device).eval()
        self.flat = FlatParams(self.net)

    def load(self, params: np.ndarray) -> None:
        self.flat.set(params)

    def _forward(self, obs: np.ndarray) -> Any:  # Any: a Q-network's values, or an actor-critic's (out, value)
        with torch.inference_mode():
            return self.net(observation_tensor(obs, self.device))


class GreedyQPolicy(_NetworkPolicy):
    """The greedy action of a Q-network; the rollout worker explores on top of it."""

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return self._forward(obs).argmax(1).cpu().numpy().astype(np.int64)


class SampledPolicy(_NetworkPolicy):
    """An action sampled from an actor-critic's ``pi(.|s)`` (its first output, as its ``head``
    reads it), and its log-probability: the behaviour policy's ``log mu(a|x)`` that V-trace and
    PPO's ratio need. A Gaussian's sample is sent unclipped; the rollout worker's env clips it."""

    def __init__(self, network_fn: Callable[[], nn.Module], device: str = "cpu", seed: int = 0) -> None:
        super().__init__(network_fn, device)
        self.generator = torch.Generator(self.device).manual_seed(seed)

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out, _ = self._forward(obs)
        head: ActionHead = getattr(self.net, "head")  # an actor-critic's; nn.Module does not declare it
        chosen, chosen_logp = head.sample(out, self.generator)
        return (chosen.cpu().numpy().astype(head.action_dtype, copy=False),
                chosen_logp.cpu().numpy().astype(np.float32, copy=False))


class RecurrentSampledPolicy(_NetworkPolicy):
    """:class:`SampledPolicy` of a recurrent actor-critic
    (:class:`~gorila.nets.recurrent.RecurrentActorCritic`): each env's core state comes in with
    its observation, zeroed first where ``starts`` says an episode begins, and leaves advanced by
    the step; the inference server keeps them. The same operations as an actor's own
    :class:`~gorila.nets.recurrent.RecurrentSampler`, so both choose alike from the same states."""

    def __init__(self, network_fn: Callable[[], nn.Module], device: str = "cpu", seed: int = 0) -> None:
        super().__init__(network_fn, device)
        self.generator = torch.Generator(self.device).manual_seed(seed)
        self.state_shape: tuple[int, ...] = tuple(getattr(self.net, "state_shape"))

    def __call__(self, obs: np.ndarray, state: np.ndarray,
                 starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        head: ActionHead = getattr(self.net, "head")
        with torch.inference_mode():
            out, _, after = getattr(self.net, "step")(observation_tensor(obs, self.device),
                                                      torch.as_tensor(state, device=self.device),
                                                      torch.as_tensor(starts, device=self.device))
            chosen, chosen_logp = head.sample(out, self.generator)
        return (chosen.cpu().numpy().astype(head.action_dtype, copy=False),
                chosen_logp.cpu().numpy().astype(np.float32, copy=False), after.cpu().numpy())
