"""The recurrent actor-critic (``--core lstm``): an LSTM core between the torso and the heads, and
what acts with it (an actor's sampler, the greedy policy of evaluation).

A recurrent network's memory is its **core state**: one ``(2, core_size)`` float32 array per env,
the LSTM's hidden and cell vectors (``h`` then ``c``), zero at the start of every episode. Whoever
acts carries it from step to step, and every call says which envs begin an episode at this step
(``starts``): their state is zeroed before the step, so no memory crosses an episode boundary::

    net = RecurrentActorCritic(torso, width=64, head=CategoricalHead(2), core_size=256)
    state = net.initial_state(8)                                   # (8, 2, 256) zeros
    out, value, state = net.step(obs, state, starts)               # one step of 8 envs (actors)
    out, values, states = net.unroll(obs_seq, state0, starts_seq)  # (T, 8, ...): a learner's segment

:meth:`~RecurrentActorCritic.unroll` is :meth:`~RecurrentActorCritic.step` repeated, the same
operations on the same shapes, so a learner that unrolls a segment from the state the actor
carried into it computes the actor's logits exactly (truncated backpropagation through time over
the segment, as IMPALA and SEED RL train their LSTM agents; TorchBeast's ``monobeast.py`` resets
its core by the same masks).

Recurrent networks have no numpy twin (:func:`gorila.nets.numpy_policy.numpy_policy` gives None):
their actors and evaluators act in torch, since a learner must reproduce an actor's logits bit for
bit, which a numpy copy of torch's LSTM, with its own rounding, would not.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from gorila.nets.flat import FlatParams
from gorila.nets.heads import CategoricalHead, GaussianHead

CORES = ("none", "lstm")
CORE_HELP = ("recurrent core between the torso and the heads: lstm (the policy remembers, carried per env through "
             "actors, segments, central inference and evaluation) or none (feed-forward); impala and ppo")


class RecurrentActorCritic(nn.Module):
    """``torso -> LSTM(core_size) -> policy head, value head`` (see the module doc).

    ``torso`` maps a batch of observations ``(M, *obs_shape)`` (``obs_rank`` axes) to ``(M, width)``
    features: a shared MLP for vectors, the convolutional torso for frames (``pixels``: scaled by
    1/255 first), MinAtar's for its grids. The policy head starts at 1% of its default scale, so the
    first policy is close to uniform; the LSTM keeps torch's own start (uniform in ±1/√core_size, as
    SB3-contrib's RecurrentPPO leaves it in RL-Zoo's settings): an orthogonal one is a QR
    factorisation, whose rounding follows the number of threads it ran on, so the same seed would
    give a network built in the driver and one built in a worker different weights. As the
    feed-forward actor-critics' torsos, the torso and core count as **policy** parameters in
    :meth:`param_groups`. With a :class:`GaussianHead` the policy output is the mean followed by a
    state-independent ``log_std``, as :class:`~gorila.nets.actor_critic.ActorCritic`'s.
    """

    def __init__(self, torso: nn.Module, width: int, head: CategoricalHead | GaussianHead, core_size: int,
                 obs_rank: int = 1, pixels: bool = False, log_std_init: float = 0.0):
        super().__init__()
        self.torso, self.core_size = torso, core_size
        self.obs_rank, self.pixels = obs_rank, pixels
        self.core = nn.LSTM(width, core_size)
        self.head: CategoricalHead | GaussianHead = head
        size = head.size if isinstance(head, GaussianHead) else head.n
        self.policy = nn.Linear(core_size, size)
        self.value = nn.Linear(core_size, 1)
        with torch.no_grad():
            self.policy.weight.mul_(0.01)
            self.policy.bias.zero_()
        continuous = isinstance(head, GaussianHead)
        self.log_std = nn.Parameter(torch.full((size,), float(log_std_init))) if continuous else None

    @property
    def state_shape(self) -> tuple[int, int]:
        """One env's core state: ``(2, core_size)``, the LSTM's ``h`` and ``c``."""
        return (2, self.core_size)

    def initial_state(self, batch: int) -> torch.Tensor:
        """``(batch, 2, core_size)`` zeros: the state of envs at the start of an episode."""
        return torch.zeros(batch, *self.state_shape, device=self.policy.weight.device)

    def encode(self, obs: torch.Tensor) -> torch.Tensor:
        """``obs (..., *obs_shape)`` -> the torso's features ``(..., width)``."""
        lead = obs.shape[:-self.obs_rank]
        flat = obs.reshape(-1, *obs.shape[-self.obs_rank:]).float()
        if self.pixels:
            flat = flat / 255.0
        return self.torso(flat).reshape(*lead, -1)

    def core_step(self, features: torch.Tensor, state: torch.Tensor,
                  starts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step of the LSTM: ``features (B, width)``, ``state (B, 2, core_size)`` and ``starts
        (B,)`` bool -> ``(core output (B, core_size), next state)``; a start's state is zeroed first."""
        state = torch.where(starts.reshape(-1, 1, 1), torch.zeros_like(state), state)
        h, c = state[:, 0].unsqueeze(0).contiguous(), state[:, 1].unsqueeze(0).contiguous()
        out, (h, c) = self.core(features.unsqueeze(0), (h, c))
        return out[0], torch.stack([h[0], c[0]], 1)

    def heads(self, core_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The core's output -> ``(policy output, value)``."""
        out = self.policy(core_out)
        if self.log_std is not None:
            out = torch.cat([out, self.log_std.expand_as(out)], -1)
        return out, self.value(core_out).squeeze(-1)

    def step(self, obs: torch.Tensor, state: torch.Tensor,
             starts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of ``B`` envs: ``obs (B, *obs_shape)`` -> ``(out (B, head.width), value (B,), state)``."""
        core_out, state = self.core_step(self.encode(obs), state, starts)
        out, value = self.heads(core_out)
        return out, value, state

    def unroll(self, obs: torch.Tensor, state: torch.Tensor,
               starts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``T`` steps of ``B`` envs from ``state``: ``obs (T, B, *obs_shape)``, ``starts (T, B)`` ->
        ``(out (T, B, head.width), values (T, B), states (T + 1, B, 2, core_size))``, ``states[t]``
        the state carried into step ``t`` (before its start's reset; ``states[T]`` the one after the last)."""
        features = self.encode(obs)
        outputs, states = [], [state]
        for t in range(obs.shape[0]):
            core_out, state = self.core_step(features[t], state, starts[t])
            outputs.append(core_out)
            states.append(state)
        out, values = self.heads(torch.stack(outputs))
        return out, values, torch.stack(states)

    def forward(self, obs: torch.Tensor, state: torch.Tensor,
                starts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`unroll`."""
        return self.unroll(obs, state, starts)

    def export_notes(self) -> dict[str, str]:
        """The safetensors metadata of the exported network (``ckpt-*.model.safetensors``): its state, in words."""
        return {"core": "lstm", "core_size": str(self.core_size),
                "core_state": f"one (2, {self.core_size}) float32 array per env: the hidden state h then the cell "
                              "state c of core (torch.nn.LSTM, one layer, sequence-first), zero at the start of every "
                              "episode and carried from step to step",
                "step": "features = torso(obs) (pixels / 255 first for frames); out, (h, c) = core(features[None], "
                        "(h[None], c[None])); logits or Gaussian mean = policy(out[0]); value = value(out[0])"}

    def param_groups(self, flat: FlatParams) -> tuple[np.ndarray, np.ndarray]:
        """``(policy_mask, value_mask)`` over ``flat``'s vector: the value head, and the rest."""
        from gorila.nets.actor_critic import value_head_groups

        return value_head_groups(self, flat)


def recurrent_around(net: nn.Module, core_size: int, log_std_init: float = 0.0) -> RecurrentActorCritic:
    """A :class:`RecurrentActorCritic` on the torso of a feed-forward actor-critic with one torso
    (an MLP ``ActorCritic(shared=True)``, ``ConvActorCritic``, ``MinAtarActorCritic``): its heads are
    left behind, new ones put after the core."""
    from gorila.nets.actor_critic import ActorCritic, ConvActorCritic

    torso, policy = getattr(net, "torso", None), getattr(net, "policy", None)
    if not isinstance(torso, nn.Module) or not isinstance(policy, nn.Linear):
        raise ValueError(f"{type(net).__name__} has no shared torso to put a core after")
    return RecurrentActorCritic(torso, policy.in_features, getattr(net, "head"), core_size,
                                obs_rank=1 if isinstance(net, ActorCritic) else 3,
                                pixels=isinstance(net, ConvActorCritic), log_std_init=log_std_init)


class RecurrentSampler:
    """Draws each env's action from pi(.|history) of a :class:`RecurrentActorCritic`, carrying
    the envs' core state (a segment actor's; the torch counterpart of a feed-forward
    :class:`~gorila.nets.numpy_policy.PolicySampler`)::

        sampler = RecurrentSampler(net, seed=1003, num_envs=8)
        carried = sampler.state                      # (8, 2, core_size) float32: a segment's start
        actions, log_probs = sampler.sample_with_log_prob(obs, starts)   # starts (8,) bool

    ``net``'s own parameters are read (its user loads them); draws come from a generator seeded
    with ``seed``."""

    in_numpy = False

    def __init__(self, net: RecurrentActorCritic, seed: int, num_envs: int):
        self.net = net
        self.generator = torch.Generator().manual_seed(seed)
        self.carried = net.initial_state(num_envs)

    @property
    def state(self) -> np.ndarray:
        """A copy of the state the envs carry into their next step."""
        return self.carried.numpy().copy()

    def set(self, flat: np.ndarray) -> None:
        """Nothing: the sampler reads ``net``'s own parameters, which its user loads."""

    def sample_with_log_prob(self, obs: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with torch.no_grad():
            out, _, self.carried = self.net.step(torch.as_tensor(obs, dtype=torch.float32), self.carried,
                                                 torch.as_tensor(starts))
            chosen, log_probs = self.net.head.sample(out, self.generator)
        return chosen.numpy(), log_probs.numpy()


class RecurrentGreedyPolicy:
    """The most likely action of each env given its history (evaluation, ``gorila eval``)::

        policy = RecurrentGreedyPolicy(net)
        actions, state = policy(obs, state, starts)   # numpy: (B, *obs_shape), (B, 2, H), (B,) bool

    ``state_shape`` is one env's core state; a state is zeroed where ``starts`` says an episode begins."""

    def __init__(self, net: RecurrentActorCritic):
        self.net = net
        self.state_shape = net.state_shape

    def __call__(self, obs: np.ndarray, state: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with torch.no_grad():
            out, _, after = self.net.step(torch.as_tensor(obs, dtype=torch.float32),
                                          torch.as_tensor(state, dtype=torch.float32), torch.as_tensor(starts))
        return self.net.head.mode(out).numpy(), after.numpy()
