"""The A2C / A3C loss, its n-step targets, and the gradient a worker pushes.

For a rollout of ``T`` steps of ``N`` environments, with a policy pi(a|s; theta), a value
network v(s; w) and a target value network v(s; w-)::

    y_t     = r_t + gamma * r_{t+1} + ... + gamma^k * v(s_{t+k}; w-)   (n-step TD target)
    delta_t = v(s_t; w) - y_t
    loss    = mean_t [ 1/2 * delta_t^2  -  (y_t - v(s_t; w)) * ln pi(a_t|s_t; theta) ]
              - entropy_coef * mean_t H(pi(.|s_t; theta))

``y_t`` and the advantage ``y_t - v(s_t)`` carry no gradient, so the gradient of the loss is
``delta_t * grad v`` for the value parameters and ``delta_t * grad ln pi`` for the policy
parameters: the server's descent step ``theta <- theta - beta * g`` is policy-gradient
ascent on ``advantage * ln pi``.

With ``lam < 1`` the target is the lambda-return instead,
``y_t = r_t + gamma * ((1 - lam) * v(s_{t+1}; w-) + lam * y_{t+1})``: each step's bootstrap mixes
its one-step and longer returns, which lowers the variance of the advantage ``y_t - v(s_t)``
(with ``w- = w`` it is generalised advantage estimation, Schulman et al., 2016). ``lam = 1`` is
the n-step target above. Usage on a worker::

    target = soft_update(target, pulled, tau)       # gorila.nets.soft_update: w- <- tau w + (1-tau) w-
    target_flat.set(target); flat.set(pulled)
    grad, info = a3c_gradients(net, target_net, rollout, gamma=0.99, entropy_coef=0.01, flat=flat, lam=1.0)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from gorila.nets.flat import FlatParams
from gorila.nets.heads import ActionHead, CategoricalHead

Array = torch.Tensor | np.ndarray


@dataclass(frozen=True)
class Rollout:
    """``T`` steps of ``N`` vectorised environments (numpy arrays or tensors).

    ``dones[t, n]`` is true when the episode of env ``n`` ended at step ``t``, terminated or
    truncated. A terminated episode bootstraps from nothing; a truncated one (time limit)
    bootstraps from the value of the observation it was cut at: pass ``truncated`` and
    ``final_obs`` (read only where ``truncated`` is true). Without them every end counts
    as a termination.

    ``valid[t, n]`` is false where env ``n`` took no real step at ``t`` (a vectorised env spends
    the step after an episode end resetting): such a slot joins no loss term, and no return
    flows across it. Without ``valid`` every slot is a real step.
    """

    obs: Array            # (T, N, *obs_shape)
    actions: Array        # (T, N) integer actions, or (T, N, size) unclipped Box actions
    rewards: Array        # (T, N)
    dones: Array          # (T, N) bool
    last_obs: Array       # (N, *obs_shape): the observation after step T - 1
    truncated: Array | None = None  # (T, N) bool, a subset of the ends
    final_obs: Array | None = None  # (T, N, *obs_shape): where a truncated episode stopped
    valid: Array | None = None      # (T, N) bool: a real step (default: all)


def n_step_returns(rewards: torch.Tensor, dones: torch.Tensor, bootstrap_value: torch.Tensor,
                   gamma: float, bootstrap_at_truncation: torch.Tensor | None = None,
                   next_values: torch.Tensor | None = None, lam: float = 1.0) -> torch.Tensor:
    """The n-step TD target (or, with ``lam < 1``, the lambda-return) of every step, ``(T, N)``.

    ``y_t = r_t + gamma * y_{t+1}`` within an episode; after the last step the rollout
    bootstraps from ``bootstrap_value`` (``(N,)``, the target value of ``last_obs``). Where
    ``dones[t]`` is true the sum stops at ``t`` and bootstraps from
    ``bootstrap_at_truncation[t]`` (``(T, N)``: the value of the state a truncated episode
    was cut at, ``0`` where it terminated); without it, from ``0``. With ``lam < 1``,
    ``y_t = r_t + gamma * ((1 - lam) * next_values[t] + lam * y_{t+1})`` within an episode,
    where ``next_values[t]`` (``(T, N)``) is the target value of the state after step ``t``.
    """
    if rewards.dim() != 2 or dones.shape != rewards.shape:
        raise ValueError(f"rewards and dones must both be (T, N), got {tuple(rewards.shape)} "
                         f"and {tuple(dones.shape)}")
    if bootstrap_value.shape != rewards.shape[1:]:
        raise ValueError(f"bootstrap_value must be (N,) = {tuple(rewards.shape[1:])}, "
                         f"got {tuple(bootstrap_value.shape)}")
    if lam < 1.0 and (next_values is None or next_values.shape != rewards.shape):
        raise ValueError("a lambda-return (lam < 1) needs next_values of the rewards' shape (T, N)")
    ended = dones.to(rewards.dtype)
    at_end = torch.zeros_like(rewards) if bootstrap_at_truncation is None else bootstrap_at_truncation
    returns = torch.empty_like(rewards)
    following = bootstrap_value.to(rewards.dtype)
    for t in reversed(range(rewards.shape[0])):
        if next_values is not None and lam < 1.0:  # given whenever lam < 1 (checked above)
            following = (1.0 - lam) * next_values[t] + lam * following
        following = rewards[t] + gamma * ((1.0 - ended[t]) * following + ended[t] * at_end[t])
        returns[t] = following
    return returns


def a3c_loss(logits: torch.Tensor, values: torch.Tensor, actions: torch.Tensor,
             returns: torch.Tensor, entropy_coef: float,
             mask: torch.Tensor | None = None, head: ActionHead | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """The A2C loss, averaged over every step (or over the steps where ``mask`` is true).

    ``logits (..., A)`` (the policy output ``head`` reads: categorical logits unless it says
    otherwise), ``values``, ``actions``, ``returns`` and ``mask`` of the same leading
    shape; ``returns`` are the targets y (no gradient flows into them). Returns ``(loss, info)``;
    ``info`` holds the floats ``policy_loss``, ``value_loss``, ``entropy`` and ``advantage``
    (the mean of y - v).
    """
    mean: Callable[[torch.Tensor], torch.Tensor] = torch.mean
    if mask is not None:
        weight = mask.to(values.dtype)
        count = weight.sum().clamp(min=1.0)

        def masked_mean(x: torch.Tensor) -> torch.Tensor:
            return (x * weight).sum() / count
        mean = masked_mean
    head = head or CategoricalHead(logits.shape[-1])
    returns = returns.detach()
    log_pi, entropies = head.log_prob_and_entropy(logits, actions)
    advantage = (returns - values).detach()
    policy_loss = -mean(advantage * log_pi)
    value_loss = 0.5 * mean((values - returns).pow(2))
    entropy = mean(entropies)
    loss = policy_loss + value_loss - entropy_coef * entropy
    info = {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(),
            "entropy": entropy.item(), "advantage": mean(advantage).item()}
    return loss, info


def rollout_targets(target_net: nn.Module, rollout: Rollout, gamma: float, lam: float = 1.0) -> torch.Tensor:
    """The n-step TD target (lambda-return for ``lam < 1``) of every slot of ``rollout``, ``(T, N)``,
    without gradient.

    Bootstraps from ``target_net``'s value of ``last_obs`` and, where an episode was
    truncated, of its ``final_obs``. An invalid slot ends the recursion (its own target is
    meaningless and never used), so a reset step can never join two episodes.
    """
    rewards = torch.as_tensor(rollout.rewards, dtype=torch.float32)
    dones = torch.as_tensor(rollout.dones, dtype=torch.bool)
    if rollout.valid is not None:
        dones = dones | ~torch.as_tensor(rollout.valid, dtype=torch.bool)
    with torch.no_grad():
        _, bootstrap = target_net(torch.as_tensor(rollout.last_obs, dtype=torch.float32))
        at_truncation = None
        if rollout.truncated is not None:
            if rollout.final_obs is None:
                raise ValueError("a rollout with truncated steps needs final_obs")
            truncated = torch.as_tensor(rollout.truncated, dtype=torch.bool)
            dones = dones | truncated
            at_truncation = torch.zeros_like(rewards)
            if truncated.any():
                final_obs = torch.as_tensor(rollout.final_obs, dtype=torch.float32)
                at_truncation[truncated] = target_net(final_obs[truncated])[1]
        next_values = None
        if lam < 1.0:
            # The state after step t is obs[t + 1], and last_obs after the final step; where the
            # episode ended, the recursion reads at_truncation instead.
            values = target_net(torch.as_tensor(rollout.obs, dtype=torch.float32))[1]
            next_values = torch.cat([values[1:], bootstrap.unsqueeze(0)])
        return n_step_returns(rewards, dones, bootstrap, gamma, at_truncation, next_values, lam)


def a3c_gradients(net: nn.Module, target_net: nn.Module, rollout: Rollout, gamma: float,
                  entropy_coef: float, flat: FlatParams, max_grad_norm: float | None = None,
                  lam: float = 1.0) -> tuple[np.ndarray, dict[str, float]]:
    """The gradient of :func:`a3c_loss` on ``rollout`` as one flat float32 vector (a copy).

    ``net(obs) -> (logits, value)`` is the online network whose parameters ``flat`` covers (its
    ``head`` reads the policy output);
    ``target_net`` gives the values the targets bootstrap from (:func:`rollout_targets`, with
    ``lam``).
    Invalid slots are left out of the loss. With ``max_grad_norm`` the vector is scaled down
    to that L2 norm when longer. ``info`` adds ``loss`` and ``grad_norm`` (before clipping)
    to the loss's info.
    """
    if flat.module is not net:
        raise ValueError("flat must be the FlatParams of net")
    returns = rollout_targets(target_net, rollout, gamma, lam)
    mask = None if rollout.valid is None else torch.as_tensor(rollout.valid, dtype=torch.bool)
    flat.zero_grad()  # in place: the gradients stay views of flat's buffer
    logits, values = net(torch.as_tensor(rollout.obs, dtype=torch.float32))
    head: ActionHead = getattr(net, "head")  # every actor-critic carries its head; nn.Module does not declare it
    loss, info = a3c_loss(logits, values, torch.as_tensor(rollout.actions), returns, entropy_coef, mask, head)
    loss.backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
    info.update(loss=loss.item(), grad_norm=flat.clip_grad_norm_(max_grad_norm))
    return flat.grad().copy(), info


@dataclass(frozen=True)
class A3CLoss:
    """The loss's settings as one value, for a worker to hold::

        loss = A3CLoss(gamma=0.99, entropy_coef=0.01, lam=0.95, max_grad_norm=0.5)
        grad, info = loss.gradients(net, target_net, rollout, flat)   # a3c_gradients with these
    """

    gamma: float = 0.99
    entropy_coef: float = 0.01
    lam: float = 1.0
    max_grad_norm: float | None = None

    def gradients(self, net: nn.Module, target_net: nn.Module, rollout: Rollout,
                  flat: FlatParams) -> tuple[np.ndarray, dict[str, float]]:
        return a3c_gradients(net, target_net, rollout, self.gamma, self.entropy_coef, flat, self.max_grad_norm,
                             self.lam)
