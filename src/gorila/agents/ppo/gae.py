"""Generalised advantage estimation (Schulman et al. 2016), GAE(lambda), on ``[T, B]`` segments::

    delta_t = r_t + discount_t * V(x_{t+1}) - V(x_t)
    A_t     = delta_t + discount_t * lambda * A_{t+1}
    advantages, returns = gae(discounts, rewards, values, bootstrap_value, lam=0.95)   # returns = A + V

``discount_t`` is gamma * (1 - terminated_t), as in :func:`gorila.losses.vtrace.vtrace_targets`.
"""

from __future__ import annotations

import torch


def gae(discounts: torch.Tensor, rewards: torch.Tensor, values: torch.Tensor, bootstrap_value: torch.Tensor,
        lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(advantages, returns)``, ``[T, B]`` each, without gradient; ``bootstrap_value`` is ``[B]``."""
    if rewards.dim() != 2 or discounts.shape != rewards.shape or values.shape != rewards.shape:
        raise ValueError("discounts, rewards and values must all be [T, B]")
    if bootstrap_value.shape != rewards.shape[1:]:
        raise ValueError(f"bootstrap_value must be [B] = {tuple(rewards.shape[1:])}, "
                         f"got {tuple(bootstrap_value.shape)}")
    with torch.no_grad():
        next_values = torch.cat([values[1:], bootstrap_value.unsqueeze(0)])
        deltas = rewards + discounts * next_values - values
        advantages = torch.empty_like(values)
        following = torch.zeros_like(bootstrap_value)
        for t in reversed(range(rewards.shape[0])):
            following = deltas[t] + discounts[t] * lam * following
            advantages[t] = following
    return advantages, advantages + values
