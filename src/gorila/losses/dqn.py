"""DQN losses as pure functions of tensors: double-Q and max-Q targets, the TD loss, and both together.

A replay :class:`~gorila.types.Batch` carries each row's ``discount`` (``γ^m``, 0 where the
episode terminated inside the row's ``m`` steps), so one-step and n-step rows share one target:
``y = R + discount · Q_target(s')``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gorila.errors import ConfigError
from gorila.losses.kinds import LOSS_KINDS, TARGET_KINDS
from gorila.nets.inputs import module_device
from gorila.types import Batch


def double_q_targets(reward: torch.Tensor, discount: torch.Tensor, next_q_online: torch.Tensor,
                     next_q_target: torch.Tensor) -> torch.Tensor:
    """``R + discount · Q_target(s', argmax_a Q_online(s', a))`` per row, without gradient::

        y = double_q_targets(batch_reward, batch_discount, online(next_obs), target(next_obs))

    The online network picks the action and the target network values it (van Hasselt et al.
    2016), which removes most of the overestimation of taking the max of one noisy estimate.
    """
    with torch.no_grad():
        best = next_q_online.argmax(dim=1, keepdim=True)
        return reward + discount * next_q_target.gather(1, best).squeeze(1)


def max_q_targets(reward: torch.Tensor, discount: torch.Tensor, next_q_target: torch.Tensor) -> torch.Tensor:
    """``R + discount · max_a Q_target(s', a)`` per row, without gradient: the target of the
    Nature DQN (Mnih et al. 2015) and of Gorila (Nair et al. 2015)."""
    with torch.no_grad():
        return reward + discount * next_q_target.max(dim=1).values


def q_loss(q_taken: torch.Tensor, targets: torch.Tensor, kind: str = "huber",
           weights: torch.Tensor | None = None) -> torch.Tensor:
    """Mean TD loss, each row weighted by ``weights`` (importance weights; 1 when None):
    ``"huber"`` (δ = 1, the Nature DQN's clipped error) or ``"mse"``.

    Huber is ``½x²`` for ``|x| ≤ 1`` and ``|x| − ½`` beyond, so its gradient is the TD error clipped
    to [−1, 1]; ``"mse"`` is the plain ``x²``.
    """
    if kind == "huber":
        rows = F.huber_loss(q_taken, targets, delta=1.0, reduction="none")
    elif kind == "mse":
        rows = F.mse_loss(q_taken, targets, reduction="none")
    else:
        raise ConfigError("loss", f"must be one of {', '.join(LOSS_KINDS)}; got {kind!r}")
    return rows.mean() if weights is None else (weights * rows).mean()


def dqn_loss(online: nn.Module, target: nn.Module, batch: Batch, kind: str = "huber",
             bootstrap: str = "double") -> tuple[torch.Tensor, dict]:
    """The importance-weighted DQN loss of a replay :class:`~gorila.types.Batch` (numpy arrays)::

        loss, info = dqn_loss(online, target, batch)                    # double-Q
        loss, info = dqn_loss(online, target, batch, bootstrap="max")   # Nature DQN
        loss.backward()        # gradients on ``online`` only
        info["loss"], info["q_mean"], info["td_abs"]    # td_abs: |TD error| per row, the new priorities

    Tensors are put on the device of ``online``'s parameters.
    """
    if bootstrap not in TARGET_KINDS:
        raise ConfigError("target", f"must be one of {', '.join(TARGET_KINDS)}; got {bootstrap!r}")
    device = module_device(online)
    obs, action, reward, next_obs, discount, weights = (
        torch.as_tensor(x, device=device) for x in (batch.obs, batch.action, batch.reward, batch.next_obs,
                                                     batch.discount, batch.weights))
    q_taken = online(obs).gather(1, action.long().unsqueeze(1)).squeeze(1)
    with torch.no_grad():
        if bootstrap == "double":
            targets = double_q_targets(reward.float(), discount.float(), online(next_obs), target(next_obs))
        else:
            targets = max_q_targets(reward.float(), discount.float(), target(next_obs))
    loss = q_loss(q_taken, targets, kind, weights.float())
    td = (targets - q_taken.detach()).abs()
    info = {"loss": float(loss.detach()), "q_mean": float(q_taken.detach().mean()),
            "target_mean": float(targets.mean()), "td_abs_mean": float(td.mean()), "td_abs": td.cpu().numpy()}
    return loss, info
