"""V-trace targets (Espeholt et al. 2018, IMPALA, eq. 1 and section 4.2): off-policy corrected value
targets and policy-gradient advantages for segments acted by an older (behaviour) policy.

For a segment of ``T`` steps of ``B`` environments, with ``rho_t = min(rho_bar, pi/mu)`` and
``c_t = min(c_bar, pi/mu)`` (pi: the learner's policy, mu: the behaviour policy)::

    delta_t = rho_t * (r_t + discount_t * V(x_{t+1}) - V(x_t))
    v_s     = V(x_s) + sum_{t >= s} (prod_{s <= i < t} discount_i * c_i) * delta_t
            = V(x_s) + delta_s + discount_s * c_s * (v_{s+1} - V(x_{s+1}))        (computed backwards)
    A_s     = min(pg_rho_bar, pi/mu) * (r_s + discount_s * v_{s+1} - V(x_s))       (pg_advantages)

``discount_t`` is gamma * (1 - terminated_t): an episode that ends inside the window cuts every
sum there. Usage::

    vs, pg_adv = vtrace_targets(log_rhos, discounts, rewards, values, bootstrap_value, rho_bar=1.0, c_bar=1.0)
    value_loss = 0.5 * (vs - values).pow(2).mean(); policy_loss = -(pg_adv * log_pi).mean()

On policy (``log_rhos = 0``, ``rho_bar, c_bar >= 1``) ``vs`` is the bootstrapped n-step return and
``pg_advantages`` GAE(lambda = 1). :func:`segment_forward` runs a network over a segment's steps and the
observation after them in one pass (a recurrent one unrolled from the segment's core state, reset where
episodes begin); :func:`bootstrap_inputs` reads the segment's rewards, discounts and bootstrap value as
V-trace and GAE take them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from gorila.nets.inputs import module_device, observation_tensor
from gorila.nets.recurrent import RecurrentActorCritic
from gorila.types import Segment


def vtrace_targets(log_rhos: torch.Tensor, discounts: torch.Tensor, rewards: torch.Tensor, values: torch.Tensor,
                   bootstrap_value: torch.Tensor, rho_bar: float = 1.0, c_bar: float = 1.0,
                   pg_rho_bar: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """``(vs, pg_advantages)``, both ``[T, B]`` and without gradient.

    ``log_rhos``: ``log pi(a_t|x_t) - log mu(a_t|x_t)``; ``discounts``, ``rewards``, ``values``
    (``V(x_t)``) ``[T, B]``; ``bootstrap_value`` ``[B]``, ``V(x_T)`` (for a truncated episode, pass
    the value of the state it was cut at through ``values``/``bootstrap_value`` as the caller lays
    its segment out). ``rho_bar`` clips the importance weights of the value target, ``c_bar`` the
    traces, ``pg_rho_bar`` those of the advantages.
    """
    shape = rewards.shape
    if rewards.dim() != 2 or any(x.shape != shape for x in (log_rhos, discounts, values)):
        raise ValueError("log_rhos, discounts, rewards and values must all be [T, B], got "
                         f"{[tuple(x.shape) for x in (log_rhos, discounts, rewards, values)]}")
    if bootstrap_value.shape != shape[1:]:
        raise ValueError(f"bootstrap_value must be [B] = {tuple(shape[1:])}, got {tuple(bootstrap_value.shape)}")
    with torch.no_grad():
        rhos = torch.exp(log_rhos)
        clipped_rhos = rhos.clamp(max=rho_bar)
        cs = rhos.clamp(max=c_bar)
        next_values = torch.cat([values[1:], bootstrap_value.unsqueeze(0)])
        deltas = clipped_rhos * (rewards + discounts * next_values - values)
        corrections = torch.empty_like(values)  # v_s - V(x_s)
        following = torch.zeros_like(bootstrap_value)
        for t in reversed(range(shape[0])):
            following = deltas[t] + discounts[t] * cs[t] * following
            corrections[t] = following
        vs = values + corrections
        next_vs = torch.cat([vs[1:], bootstrap_value.unsqueeze(0)])
        pg_advantages = rhos.clamp(max=pg_rho_bar) * (rewards + discounts * next_vs - values)
    return vs, pg_advantages


class Forward(NamedTuple):
    """What :func:`segment_forward` gives: the segment's observations on the network's device, the
    steps' policy outputs and values ``(T, N, ...)``, ``after``: ``V(last_obs)`` without gradient,
    and, for a recurrent network, ``final``: the values of the truncated steps' final observations
    (None for a feed-forward one, whose :func:`bootstrap_inputs` computes them)."""

    obs: torch.Tensor
    out: torch.Tensor
    values: torch.Tensor
    after: torch.Tensor
    final: torch.Tensor | None = None


def segment_forward(net: nn.Module, segment: Segment) -> Forward:
    """One forward pass of ``net`` over the segment's observations and the observation after them
    (``last_obs``): a second call for the bootstrap alone, at the actors' small batch, costs most of
    what the first does. A :class:`~gorila.nets.recurrent.RecurrentActorCritic` is unrolled instead
    (:func:`recurrent_forward`)."""
    if isinstance(net, RecurrentActorCritic):
        return recurrent_forward(net, segment)
    device = module_device(net)
    obs = observation_tensor(segment.obs, device)  # frames cross as bytes, cast by the network
    last = observation_tensor(segment.last_obs, device).unsqueeze(0)
    out, values = net(torch.cat([obs, last]))
    return Forward(obs, out[:-1], values[:-1], values[-1].detach())


def recurrent_forward(net: RecurrentActorCritic, segment: Segment) -> Forward:
    """The network unrolled over the segment from the core state its envs carried into it
    (``segment.core_state``), each env's state zeroed where ``segment.starts`` says its episode
    begins: truncated backpropagation through time over the segment, the gradient flowing back to
    its first step and no further. ``after`` is ``V(last_obs)`` from the state after the last step,
    with no reset: where ``last_obs`` begins an episode, the last step ended one (or only reset the
    env), so its discount is 0 and the bootstrap is never read. A truncated step's final
    observation is valued from the state after that step, as the episode's next step would have been."""
    if segment.core_state is None or segment.starts is None:
        raise ValueError("a recurrent network learns from segments that carry core_state and starts")
    device = module_device(net)
    obs = observation_tensor(segment.obs, device)
    starts = torch.as_tensor(segment.starts, device=device)
    out, values, states = net.unroll(obs, torch.as_tensor(segment.core_state, device=device), starts)
    with torch.no_grad():
        last = observation_tensor(segment.last_obs, device)
        _, after, _ = net.step(last, states[-1], torch.zeros(len(last), dtype=torch.bool, device=device))
        final = None
        cut = segment.truncated & segment.valid
        if cut.any():
            times, envs = np.nonzero(cut)
            final_obs = observation_tensor(segment.final_values_at(cut), device)
            _, final, _ = net.step(final_obs, states[times + 1, envs],
                                   torch.zeros(len(times), dtype=torch.bool, device=device))
    return Forward(obs, out, values, after, final)


def bootstrap_inputs(net: nn.Module, segment: Segment, forward: Forward
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(rewards, discounts, bootstrap_value)`` of ``segment`` as V-trace and GAE read them, without
    gradient: a truncated step's reward gains ``discount * V(final_obs)`` and its discount becomes 0
    (the episode's sums end with the value of where it was cut); reset slots and failed envs get
    discount 0 too, so no return flows across them; the bootstrap is ``V(last_obs)``,
    ``forward.after`` (from :func:`segment_forward`, with the final values of a recurrent network).
    Tensors are on the device of ``net``'s parameters."""
    device = module_device(net)
    valid = torch.as_tensor(segment.valid, device=device)
    rewards = torch.as_tensor(segment.rewards, dtype=torch.float32, device=device)
    discounts = torch.as_tensor(segment.discounts, dtype=torch.float32, device=device)
    cut = segment.truncated & segment.valid
    truncated = torch.as_tensor(cut, device=device)
    with torch.no_grad():
        if cut.any():  # only the cut steps' final observations travel to the device
            final = (forward.final if forward.final is not None
                     else net(observation_tensor(segment.final_values_at(cut), device))[1])
            rewards = rewards.clone()
            rewards[truncated] += discounts[truncated] * final
        discounts = torch.where(truncated | ~valid, torch.zeros_like(discounts), discounts)
    return rewards, discounts, forward.after
