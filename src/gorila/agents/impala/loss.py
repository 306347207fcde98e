"""IMPALA's V-trace actor-critic loss on a batch of segments, and the gradient a learner pushes::

    loss = -mean(pg_advantages * log pi(a|x))  +  value_coef * 1/2 * mean((vs - V(x))^2)  -  entropy_coef * mean(H)
    grad, info = ImpalaLoss(gamma=0.99, rho_bar=1.0, c_bar=1.0).gradients(net, segment, flat)

``vs`` and ``pg_advantages`` come from :func:`gorila.losses.vtrace.vtrace_targets` with the
importance weights pi / mu of the learner's policy over the behaviour policy's ``log_probs``; with
``vtrace=False`` they are taken as 1 (the data treated as on-policy: n-step targets, as A3C does).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from gorila.losses.vtrace import bootstrap_inputs, segment_forward, vtrace_targets
from gorila.nets.flat import FlatParams
from gorila.nets.heads import ActionHead
from gorila.nets.inputs import module_device
from gorila.types import Segment


@dataclass(frozen=True)
class ImpalaLoss:
    """The loss's settings as one value, for a learner to hold (see the module doc)."""

    gamma: float = 0.99
    entropy_coef: float = 0.01
    value_coef: float = 0.5
    rho_bar: float = 1.0
    c_bar: float = 1.0
    pg_rho_bar: float = 1.0
    vtrace: bool = True
    max_grad_norm: float | None = None

    def gradients(self, net: nn.Module, segment: Segment, flat: FlatParams) -> tuple[np.ndarray, dict[str, float]]:
        """The flat float32 gradient of the loss on ``segment`` (a copy) and floats ``loss``,
        ``policy_loss``, ``value_loss``, ``entropy``, ``rho_mean`` and ``grad_norm`` (before clipping)."""
        if flat.module is not net:
            raise ValueError("flat must be the FlatParams of net")
        device = module_device(net)
        valid = torch.as_tensor(segment.valid, device=device)
        weight = valid.float()
        count = weight.sum().clamp(min=1.0)
        flat.zero_grad()  # in place: the gradients stay views of flat's buffer
        forward = segment_forward(net, segment)
        out, values = forward.out, forward.values
        rewards, discounts, bootstrap = bootstrap_inputs(net, segment, forward)
        head: ActionHead = getattr(net, "head")  # the actor-critic's action distribution (nets/heads.py)
        log_pi, entropies = head.log_prob_and_entropy(out, torch.as_tensor(segment.actions, device=device))
        behaviour = torch.as_tensor(segment.log_probs, dtype=torch.float32, device=device)
        log_rhos = (log_pi.detach() - behaviour) * weight if self.vtrace else torch.zeros_like(log_pi)
        vs, pg_advantages = vtrace_targets(log_rhos, discounts, rewards, values.detach(), bootstrap,
                                           self.rho_bar, self.c_bar, self.pg_rho_bar)
        policy_loss = -(pg_advantages * log_pi * weight).sum() / count
        value_loss = 0.5 * ((vs - values).pow(2) * weight).sum() / count
        entropy = (entropies * weight).sum() / count
        loss = policy_loss + self.value_coef * value_loss - self.entropy_coef * entropy
        loss.backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
        info = {"loss": loss.item(), "policy_loss": policy_loss.item(), "value_loss": value_loss.item(),
                "entropy": entropy.item(), "rho_mean": ((log_rhos.exp() * weight).sum() / count).item(),
                "grad_norm": flat.clip_grad_norm_(self.max_grad_norm)}
        return flat.grad().copy(), info
