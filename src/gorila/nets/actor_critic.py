"""Policy and value networks (A2C / A3C, IMPALA, PPO): MLPs for vectors (discrete or Box actions), a
convolutional torso for frames (discrete actions)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from gorila.nets.encoders import conv_encoder
from gorila.nets.flat import FlatParams
from gorila.nets.heads import CategoricalHead, GaussianHead
from gorila.nets.mlp import mlp
from gorila.nets.numpy_mlp import NumpyGaussian, NumpyMLP


class ActorCritic(nn.Module):
    """A policy network pi(a|s; theta) (logits) and a value network v(s; w)::

        net = ActorCritic(obs_dim=4, n_actions=2, hidden=(64, 64))
        logits, value = net(obs)          # obs (..., 4) -> logits (..., 2), value (...)
        policy_mask, value_mask = net.param_groups(FlatParams(net))
        lr = np.where(policy_mask, lr_policy, lr_value).astype(np.float32)

    With ``shared=False`` (the default) policy and value are two separate MLPs with the
    given hidden layers. With ``shared=True`` one MLP torso of ``hidden`` layers feeds two
    linear heads; the torso is trained by both losses and counts as a **policy** parameter in
    :meth:`param_groups` (it is updated with the policy learning rate).

    Hidden layers use tanh, and the policy's output layer starts at 1% of its default scale
    with zero bias: the initial policy is then close to uniform, which keeps early, noisy
    advantages from collapsing it onto one action (on CartPole this made A2C learn reliably
    where ReLU and the default initialisation stalled on some seeds).

    With ``continuous=True`` the policy is a diagonal Gaussian over ``n_actions`` dimensions
    (:class:`~gorila.nets.heads.GaussianHead`): the policy layer gives the mean (near 0 at first,
    as above) and a state-independent ``log_std`` parameter, starting at ``log_std_init`` (0: a
    standard deviation of 1), is appended to it, so
    the first output is ``(..., 2 * n_actions)``. Otherwise ``net.head`` is a
    :class:`~gorila.nets.heads.CategoricalHead` and the first output the logits.
    """

    def __init__(self, obs_dim: int, n_actions: int, hidden: Sequence[int] = (64, 64),
                 shared: bool = False, continuous: bool = False, log_std_init: float = 0.0):
        super().__init__()
        self.shared = shared
        self.head: CategoricalHead | GaussianHead = (GaussianHead(n_actions) if continuous
                                                     else CategoricalHead(n_actions))
        self.policy: nn.Linear | nn.Sequential
        self.value: nn.Linear | nn.Sequential
        if shared:
            self.torso = mlp(obs_dim, hidden, activation=nn.Tanh)
            width = hidden[-1] if hidden else obs_dim
            self.policy = out = nn.Linear(width, n_actions)
            self.value = nn.Linear(width, 1)
        else:
            self.policy = mlp(obs_dim, hidden, n_actions, activation=nn.Tanh)
            self.value = mlp(obs_dim, hidden, 1, activation=nn.Tanh)
            last = self.policy[-1]
            assert isinstance(last, nn.Linear)  # mlp() ends in a Linear when given out_dim
            out = last
        with torch.no_grad():
            out.weight.mul_(0.01)
            out.bias.zero_()
        # registered after the layers: an MLP policy's layers stay the flat vector's first entries
        self.log_std = nn.Parameter(torch.full((n_actions,), float(log_std_init))) if continuous else None

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs (..., obs_dim)`` -> ``(out (..., head.width), value (...))``: the logits, or the
        Gaussian's mean and log-std side by side."""
        features = self.torso(obs) if self.shared else obs
        out = self.policy(features)
        if self.log_std is not None:
            out = torch.cat([out, self.log_std.expand_as(out)], -1)
        return out, self.value(features).squeeze(-1)

    def param_groups(self, flat: FlatParams) -> tuple[np.ndarray, np.ndarray]:
        """Boolean masks over ``flat``'s vector: ``(policy_mask, value_mask)``.

        Every entry is in exactly one group; a shared torso belongs to the policy group.
        """
        return value_head_groups(self, flat)


class ConvActorCritic(nn.Module):
    """The actor-critic for stacked 84×84 frames: one convolutional torso, a policy head and a value head::

        net = ConvActorCritic(n_actions=6)                       # the Nature CNN's torso
        net = ConvActorCritic(n_actions=6, encoder="mnih2013")   # Mnih et al. 2013's, A3C's
        logits, value = net(obs)          # obs (..., 4, 84, 84), uint8 or float pixels -> (..., 6), (...)

    The torso is an encoder of :mod:`gorila.nets.encoders` (its convolutions and the fully connected
    layer after them, ReLU); pixels are scaled by 1/255 here. As with :class:`ActorCritic`'s shared
    torso, the torso counts as a **policy** parameter in :meth:`param_groups`.

    The weights start orthogonal, as the Atari actor-critics of OpenAI Baselines (A2C, PPO) and
    those that follow them (CleanRL, Sample Factory) start theirs: the torso's layers with gain
    √2 (ReLU's), the policy head with gain 0.01, so the first policy is close to uniform, the value
    head with gain 1; biases at 0.
    """

    def __init__(self, n_actions: int, in_channels: int = 4, image_size: tuple[int, int] = (84, 84),
                 encoder: str = "nature"):
        super().__init__()
        features, n_features, width = conv_encoder(encoder, in_channels, image_size)
        self.torso = nn.Sequential(features, nn.Linear(n_features, width), nn.ReLU())
        self.head = CategoricalHead(n_actions)
        self.policy = nn.Linear(width, n_actions)
        self.value = nn.Linear(width, 1)
        layers = [m for m in self.torso.modules() if isinstance(m, nn.Conv2d | nn.Linear)]
        for layer, gain in [*((layer, math.sqrt(2.0)) for layer in layers), (self.policy, 0.01), (self.value, 1.0)]:
            nn.init.orthogonal_(layer.weight, gain)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs (..., C, H, W)`` -> ``(logits (..., n_actions), value (...))``: any leading axes,
        as a rollout's ``(T, N)``."""
        lead = obs.shape[:-3]
        pixels = obs.reshape(-1, *obs.shape[-3:]).float() / 255.0
        if torch.is_grad_enabled():
            # A learner's batch in channels-last order: on a CPU its convolutions' backward pass took
            # half the time (mnih2013: 1,660 -> 2,507 samples/s, nature 874 -> 1,034, a batch of 160,
            # one thread). Acting (no gradient, a few envs) stays in the default order, which was the
            # faster one there (mnih2013 at 8 observations: 5,445 against 3,349 a second).
            pixels = pixels.contiguous(memory_format=torch.channels_last)
        features = self.torso(pixels)
        return self.policy(features).reshape(*lead, -1), self.value(features).reshape(lead)

    def param_groups(self, flat: FlatParams) -> tuple[np.ndarray, np.ndarray]:
        """``(policy_mask, value_mask)`` over ``flat``'s vector: the value head, and the rest."""
        return value_head_groups(self, flat)


def value_head_groups(net: nn.Module, flat: FlatParams) -> tuple[np.ndarray, np.ndarray]:
    """``(policy_mask, value_mask)`` of an actor-critic whose value head is named ``value``: that
    head is the value group, everything else (a shared torso included) the policy group."""
    if flat.module is not net:
        raise ValueError("param_groups needs the FlatParams of this network")
    policy_mask = np.zeros(flat.size, dtype=bool)
    for name, where in flat.slices().items():
        if not name.startswith("value."):
            policy_mask[where] = True
    return policy_mask, ~policy_mask


def numpy_mlp_policy(net: nn.Module) -> NumpyMLP | NumpyGaussian | None:
    """The policy of an MLP :class:`ActorCritic` as a :class:`~gorila.nets.numpy_mlp.NumpyMLP` that
    takes the network's whole flat vector (its greedy actions are the argmax of the logits, without
    torch), or for a Gaussian policy a :class:`~gorila.nets.numpy_mlp.NumpyGaussian` (its mean's MLP
    and its log-std); None for other networks (convolutional ones)::

        policy = numpy_mlp_policy(net)  # unset: builders hand it to the evaluator
        policy.set(FlatParams(net).get()); policy.greedy(obs)

    The policy's layers (a shared torso's, then the policy head) come first in the vector, after a
    Gaussian's log-std (the module's own parameter, which torch lists before its layers), the value
    network after them; that is checked here against :class:`~gorila.nets.flat.FlatParams`' order,
    so a network laid out otherwise gets None rather than a copy that reads the wrong entries."""
    from gorila.nets.flat import FlatParams

    if not isinstance(net, ActorCritic):
        return None
    torso = list(net.torso) if net.shared else []
    head = list(net.policy) if isinstance(net.policy, nn.Sequential) else [net.policy]
    layers = torso + head
    linears = [layer for layer in layers[0::2] if type(layer) is nn.Linear]
    if (len(linears) != len(layers[0::2]) or len(layers) != 2 * len(linears) - 1
            or not all(type(layer) is nn.Tanh for layer in layers[1::2])):
        return None
    # the policy's parameters, in its layer order, must be the vector's first entries (after the log-std)
    policy_params = [p for layer in linears for p in (layer.weight, layer.bias)]
    log_std = [] if net.log_std is None else [net.log_std]
    flat = FlatParams(net)
    expected = log_std + policy_params
    if len(flat.params) < len(expected) or any(a is not b for a, b in zip(expected, flat.params)):
        return None
    widths = (linears[0].in_features, *(layer.out_features for layer in linears))
    offset = sum(p.numel() for p in log_std)
    mean = NumpyMLP(widths, activation="tanh", total=flat.size, offset=offset)
    return mean if net.log_std is None else NumpyGaussian(mean, log_std_at=0)
