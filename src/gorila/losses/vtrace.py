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
observation after them in one pass; :func:`bootstrap_inputs` reads the segment's rewards, discounts and
bootstrap value as V-trace and GAE take them.
"""

from __future__ import annotations

import torch
from torch import nn

from gorila.nets.inputs import module_device, observation_tensor
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


def segment_forward(net: nn.Module, segment: Segment
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(obs, out, values, after)``: the segment's observations on ``net``'s device, and one forward
    pass of ``net`` over them and the observation after them (``last_obs``): the steps' outputs and
    values, and ``V(last_obs)`` without gradient, the bootstrap :func:`bootstrap_inputs` takes. A
    second call for the bootstrap alone, at the actors' small batch, costs most of what the first does."""
    device = module_device(net)
    obs = observation_tensor(segment.obs, device)  # frames cross as bytes, cast by the network
    last = observation_tensor(segment.last_obs, device).unsqueeze(0)
    out, values = net(torch.cat([obs, last]))
    return obs, out[:-1], values[:-1], values[-1].detach()


def bootstrap_inputs(net: nn.Module, segment: Segment, bootstrap: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(rewards, discounts, bootstrap_value)`` of ``segment`` as V-trace and GAE read them, without
    gradient: a truncated step's reward gains ``discount * V(final_obs)`` and its discount becomes 0
    (the episode's sums end with the value of where it was cut); reset slots and failed envs get
    discount 0 too, so no return flows across them; the bootstrap is ``V(last_obs)``, ``bootstrap``
    (from :func:`segment_forward`). Tensors are on the device of ``net``'s parameters."""
    device = module_device(net)
    valid = torch.as_tensor(segment.valid, device=device)
    rewards = torch.as_tensor(segment.rewards, dtype=torch.float32, device=device)
    discounts = torch.as_tensor(segment.discounts, dtype=torch.float32, device=device)
    cut = segment.truncated & segment.valid
    truncated = torch.as_tensor(cut, device=device)
    with torch.no_grad():
        if cut.any():  # only the cut steps' final observations travel to the device
            final = net(observation_tensor(segment.final_values_at(cut), device))[1]
            rewards = rewards.clone()
            rewards[truncated] += discounts[truncated] * final
        discounts = torch.where(truncated | ~valid, torch.zeros_like(discounts), discounts)
    return rewards, discounts, bootstrap
