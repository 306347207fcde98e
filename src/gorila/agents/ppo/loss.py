"""PPO's per-batch targets and minibatch gradients on segments (PPO with GAE, or APPO with V-trace)::

    loss = PPOLoss(gamma=0.99, lam=0.95, clip=0.2, advantages="gae")
    batch = loss.targets(net, segment)                  # flat valid steps: advantages, returns, old values
    for idx in minibatches:                             # idx < len(batch)
        grad, info = loss.gradient(net, flat, batch.select(idx))

A recurrent network's batch keeps its segments' sequences whole (``len(batch)`` counts envs, not
steps): a minibatch is some envs' whole sequences, unrolled again from the core states they began
with (as CleanRL's ``ppo_atari_lstm.py`` and SB3-contrib's RecurrentPPO do), since a step taken
out of its sequence has lost the memory its action came from.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from gorila.agents.ppo.gae import gae
from gorila.agents.ppo.surrogate import ppo_loss
from gorila.losses.vtrace import bootstrap_inputs, segment_forward, vtrace_targets
from gorila.nets.flat import FlatParams
from gorila.nets.heads import ActionHead
from gorila.nets.inputs import module_device
from gorila.types import Segment

ADVANTAGES = ("gae", "vtrace")


@dataclass(frozen=True)
class PPOBatch:
    """The valid steps of a batch of segments, flattened, with their targets; for a recurrent
    network every step of its sequences, ``(T, B, ...)``, with ``valid`` saying which join the loss,
    the ``core_state`` each env began with and where episodes begin (``starts``)."""

    obs: torch.Tensor
    actions: torch.Tensor
    old_log_probs: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    old_values: torch.Tensor
    valid: torch.Tensor | None = None
    core_state: torch.Tensor | None = None
    starts: torch.Tensor | None = None

    def __len__(self) -> int:
        """Steps, or a recurrent network's sequences: what a minibatch's indices count."""
        return len(self.actions) if self.core_state is None else self.actions.shape[1]

    def select(self, idx: np.ndarray) -> PPOBatch:
        index = torch.as_tensor(idx, device=self.actions.device)
        if self.core_state is None:
            return PPOBatch(*(getattr(self, name)[index] for name in self.__dataclass_fields__
                              if getattr(self, name) is not None))
        return PPOBatch(*(getattr(self, name).index_select(0 if name == "core_state" else 1, index)
                          for name in self.__dataclass_fields__))


@dataclass(frozen=True)
class PPOLoss:
    """PPO's settings as one value, for a learner to hold. ``advantages="gae"`` is PPO (GAE(lam)
    against the behaviour policy's values); ``"vtrace"`` is APPO (V-trace's advantages and value
    targets, corrected by pi / mu, for segments of older policies). ``normalize`` scales each
    batch's advantages to mean 0 and standard deviation 1; ``value_clip`` clips the value change."""

    gamma: float = 0.99
    lam: float = 0.95
    clip: float = 0.2
    value_coef: float = 0.5
    entropy_coef: float = 0.0
    value_clip: float | None = None
    normalize: bool = True
    advantages: str = "gae"
    rho_bar: float = 1.0
    c_bar: float = 1.0
    max_grad_norm: float | None = 0.5

    def targets(self, net: nn.Module, segment: Segment) -> PPOBatch:
        """The batch's valid steps with advantages and returns from ``net`` (no gradient)."""
        device = module_device(net)
        actions = torch.as_tensor(segment.actions, device=device)
        behaviour = torch.as_tensor(segment.log_probs, dtype=torch.float32, device=device)
        valid = torch.as_tensor(segment.valid, device=device)
        with torch.no_grad():
            forward = segment_forward(net, segment)
            obs, out, values = forward.obs, forward.out, forward.values
            rewards, discounts, bootstrap = bootstrap_inputs(net, segment, forward)
            if self.advantages == "vtrace":
                head: ActionHead = getattr(net, "head")  # an actor-critic's; nn.Module does not declare it
                log_pi = head.log_prob(out, actions)
                log_rhos = (log_pi - behaviour) * valid.float()
                returns, advantages = vtrace_targets(log_rhos, discounts, rewards, values, bootstrap,
                                                     self.rho_bar, self.c_bar, self.rho_bar)
            else:
                advantages, returns = gae(discounts, rewards, values, bootstrap, self.lam)
        flat = advantages[valid]
        if self.normalize and len(flat) > 1:
            flat = (flat - flat.mean()) / (flat.std() + 1e-8)
        if segment.core_state is None:
            return PPOBatch(obs[valid], actions[valid], behaviour[valid], flat, returns[valid], values[valid])
        advantages = torch.zeros_like(advantages)
        advantages[valid] = flat
        return PPOBatch(obs, actions, behaviour, advantages, returns, values, valid,
                        torch.as_tensor(segment.core_state, device=device),
                        torch.as_tensor(segment.starts, device=device))

    def gradient(self, net: nn.Module, flat: FlatParams, batch: PPOBatch) -> tuple[np.ndarray, dict[str, float]]:
        """The flat gradient of the clipped surrogate on a minibatch (a copy) and its floats."""
        if flat.module is not net:
            raise ValueError("flat must be the FlatParams of net")
        flat.zero_grad()
        if batch.valid is not None:  # whole sequences, unrolled from the states they began with; valid steps scored
            out, values, _ = net(batch.obs, batch.core_state, batch.starts)
            valid = batch.valid
            logits, values = out[valid], values[valid]
            batch = PPOBatch(batch.obs, batch.actions[valid], batch.old_log_probs[valid], batch.advantages[valid],
                             batch.returns[valid], batch.old_values[valid])
        else:
            logits, values = net(batch.obs)
        head: ActionHead = getattr(net, "head")  # every actor-critic carries its head; nn.Module does not declare it
        loss, info = ppo_loss(logits, values, batch.actions, batch.old_log_probs, batch.advantages, batch.returns,
                              self.clip, self.value_coef, self.entropy_coef, batch.old_values, self.value_clip,
                              head)
        loss.backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
        info.update(loss=loss.item(), grad_norm=flat.clip_grad_norm_(self.max_grad_norm))
        return flat.grad().copy(), info
