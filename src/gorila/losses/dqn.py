"""DQN losses as pure functions of tensors: double-Q and max-Q targets, the TD loss, and both together."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gorila.errors import ConfigError
from gorila.replay.storage import Batch

LOSS_KINDS = ("huber", "mse")
TARGET_KINDS = ("double", "max")


def double_q_targets(reward: torch.Tensor, done: torch.Tensor, next_q_online: torch.Tensor,
                     next_q_target: torch.Tensor, gamma: float) -> torch.Tensor:
    """``r + γ (1 − done) Q_target(s', argmax_a Q_online(s', a))`` per row, without gradient::

        y = double_q_targets(batch_reward, batch_done, online(next_obs), target(next_obs), 0.99)

    The online network picks the action and the target network values it (van Hasselt et al.
    2016), which removes most of the overestimation of taking the max of one noisy estimate.
    ``done`` is 1 where the episode terminated; a truncated episode must pass 0 so that it still
    bootstraps.
    """
    with torch.no_grad():
        best = next_q_online.argmax(dim=1, keepdim=True)
        next_value = next_q_target.gather(1, best).squeeze(1)
        return reward + gamma * (1.0 - done.float()) * next_value


def max_q_targets(reward: torch.Tensor, done: torch.Tensor, next_q_target: torch.Tensor,
                  gamma: float) -> torch.Tensor:
    """``r + γ (1 − done) max_a Q_target(s', a)`` per row, without gradient: the target of the
    Nature DQN (Mnih et al. 2015) and of Gorila (Nair et al. 2015)."""
    with torch.no_grad():
        return reward + gamma * (1.0 - done.float()) * next_q_target.max(dim=1).values


def q_loss(q_taken: torch.Tensor, targets: torch.Tensor, kind: str = "huber") -> torch.Tensor:
    """Mean TD loss: ``"huber"`` (δ = 1, the Nature DQN's clipped error) or ``"mse"``.

    Huber is ``½x²`` for ``|x| ≤ 1`` and ``|x| − ½`` beyond, so its gradient is the TD error clipped
    to [−1, 1]; ``"mse"`` is the plain mean of ``x²``.
    """
    if kind == "huber":
        return F.huber_loss(q_taken, targets, delta=1.0)
    if kind == "mse":
        return F.mse_loss(q_taken, targets)
    raise ConfigError("loss", f"must be one of {', '.join(LOSS_KINDS)}; got {kind!r}")


def dqn_loss(online: nn.Module, target: nn.Module, batch: Batch, gamma: float,
             kind: str = "huber", bootstrap: str = "double") -> tuple[torch.Tensor, dict[str, float]]:
    """DQN loss of a replay :class:`~gorila.replay.storage.Batch` (numpy arrays)::

        loss, info = dqn_loss(online, target, batch, gamma=0.99)                   # double-Q
        loss, info = dqn_loss(online, target, batch, gamma=0.99, bootstrap="max")  # Nature DQN
        loss.backward()        # gradients on ``online`` only
        info["q_mean"], info["td_abs_mean"]

    Tensors are put on the device of ``online``'s parameters.
    """
    if bootstrap not in TARGET_KINDS:
        raise ConfigError("target", f"must be one of {', '.join(TARGET_KINDS)}; got {bootstrap!r}")
    device = next(online.parameters()).device
    obs, action, reward, next_obs, done = (torch.as_tensor(x, device=device) for x in batch)
    q_taken = online(obs).gather(1, action.long().unsqueeze(1)).squeeze(1)
    with torch.no_grad():
        if bootstrap == "double":
            targets = double_q_targets(reward.float(), done, online(next_obs), target(next_obs), gamma)
        else:
            targets = max_q_targets(reward.float(), done, target(next_obs), gamma)
    loss = q_loss(q_taken, targets, kind)
    td = (targets - q_taken.detach()).abs()
    info = {"loss": float(loss.detach()), "q_mean": float(q_taken.detach().mean()),
            "target_mean": float(targets.mean()), "td_abs_mean": float(td.mean())}
    return loss, info
