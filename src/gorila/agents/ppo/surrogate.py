"""PPO's clipped surrogate loss (Schulman et al. 2017), with an optional clipped value loss::

    ratio = exp(log_pi - old_log_pi)
    L     = -mean(min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A))
            + value_coef * 1/2 * mean((V - R)^2)    (or the max of it and the clipped V's, with value_clip)
            - entropy_coef * mean(H(pi))
    loss, info = ppo_loss(logits, values, actions, old_log_probs, advantages, returns, clip=0.2)
"""

from __future__ import annotations

import torch

from gorila.nets.heads import ActionHead, CategoricalHead


def ppo_loss(logits: torch.Tensor, values: torch.Tensor, actions: torch.Tensor, old_log_probs: torch.Tensor,
             advantages: torch.Tensor, returns: torch.Tensor, clip: float = 0.2, value_coef: float = 0.5,
             entropy_coef: float = 0.0, old_values: torch.Tensor | None = None,
             value_clip: float | None = None,
             head: ActionHead | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss over a minibatch (any leading shape; ``logits`` has the actions last: the policy
    output ``head`` reads, categorical logits unless it says otherwise) and floats
    ``policy_loss``, ``value_loss``, ``entropy``, ``clip_fraction`` and ``approx_kl``.
    ``advantages``, ``returns`` and ``old_*`` carry no gradient."""
    head = head or CategoricalHead(logits.shape[-1])
    advantages, returns, old_log_probs = advantages.detach(), returns.detach(), old_log_probs.detach()
    log_pi, entropies = head.log_prob_and_entropy(logits, actions)
    log_ratio = log_pi - old_log_probs
    ratio = torch.exp(log_ratio)
    surrogate = torch.min(ratio * advantages, ratio.clamp(1.0 - clip, 1.0 + clip) * advantages)
    policy_loss = -surrogate.mean()
    value_error = (values - returns).pow(2)
    if value_clip is not None:
        if old_values is None:
            raise ValueError("value_clip needs old_values")
        old_values = old_values.detach()
        clipped = old_values + (values - old_values).clamp(-value_clip, value_clip)
        value_error = torch.max(value_error, (clipped - returns).pow(2))
    value_loss = 0.5 * value_error.mean()
    entropy = entropies.mean()
    loss = policy_loss + value_coef * value_loss - entropy_coef * entropy
    with torch.no_grad():
        info = {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(), "entropy": entropy.item(),
                "clip_fraction": ((ratio - 1.0).abs() > clip).float().mean().item(),
                "approx_kl": ((ratio - 1.0) - log_ratio).mean().item()}
    return loss, info
