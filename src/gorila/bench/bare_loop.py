"""The bare PyTorch loops ``gorila bench learner`` times a learner against: the learner's network and
loss on batches already in memory, stepped by the torch optimizer of the same name as the run's
server optimizer, in the learner's own process; and the rate of the measured learner's pushes they
are compared with (:func:`pushed_rate`)."""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable
from typing import Protocol

import torch
from torch import nn

from gorila.learners.device_copy import DEVICE_FIELDS
from gorila.learners.q_learner import QLearner
from gorila.losses.dqn import dqn_loss
from gorila.nets.inputs import module_device
from gorila.params import ParameterClient
from gorila.types import Batch

# The bare loop's optimizer for each server optimizer name (torch's defaults otherwise).
TORCH_OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {
    "sgd": torch.optim.SGD, "momentum": functools.partial(torch.optim.SGD, momentum=0.9),
    "adagrad": torch.optim.Adagrad, "rmsprop": torch.optim.RMSprop, "adam": torch.optim.Adam}


class PushingLearner(Protocol):
    """What :func:`pushed_rate` reads of a learner (a bundle, a replay learner, an IMPALA or PPO
    learner): how many updates it has pushed, and the client whose ``complete`` waits for the
    reply of the last push still in flight."""

    @property
    def pushes(self) -> int: ...

    @property
    def client(self) -> ParameterClient: ...


def pushed_rate(learner: PushingLearner, step: Callable[[], object], seconds: float) -> float:
    """Updates ``learner`` pushed per second while ``step`` is called for about ``seconds``, the
    last push's reply included (a push is not counted done before the server has answered it)::

        pushed_rate(bundle, bundle.learn, 1.0)
    """
    start, t0 = learner.pushes, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
    learner.client.complete()
    return (learner.pushes - start) / (time.perf_counter() - t0)


def on_device(batch: Batch, device: torch.device) -> Batch:
    """``batch`` with the arrays the loss reads as tensors on ``device``."""
    tensors = {name: torch.as_tensor(getattr(batch, name), device=device) for name in DEVICE_FIELDS}
    return batch._replace(**tensors)  # type: ignore[arg-type]  # the loss reads tensors where replay holds arrays


class BareQLoop:
    """The limit of a Q-learner (DQN's bundle, Ape-X's replay learner): copies of its online network
    (dueling or not) as network and target, its TD loss and bootstrap target (rows weighted by the
    batches' importance weights, as the learner weights them), its gradient clip, and a torch
    optimizer, cycling through ``batches`` moved to the learner's device once::

        loop = BareQLoop(q_learner, batches, optimizer="adam", lr=1e-3)
        loop.rate(1.0)      # updates per second

    What it leaves out is what the measured pipeline adds: sampling, copying the parameters into
    the network, the optimizer on flat numpy slices, pushes and publications.
    """

    def __init__(self, learner: QLearner, batches: list[Batch], optimizer: str, lr: float):
        self.learner = learner
        self.device = module_device(learner.online)
        self.batches = [on_device(batch, self.device) for batch in batches]
        self.net = copy.deepcopy(learner.online)
        self.target = copy.deepcopy(learner.online)
        self.optimizer = TORCH_OPTIMIZERS[optimizer](self.net.parameters(), lr=lr)

    def rate(self, seconds: float) -> float:
        """Updates per second over about ``seconds``."""
        learner = self.learner
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            self.optimizer.zero_grad()
            loss, _ = dqn_loss(self.net, self.target, self.batches[steps % len(self.batches)], learner.loss,
                               learner.target_kind)
            loss.backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
            if learner.max_grad_norm is not None:
                nn.utils.clip_grad_norm_(self.net.parameters(), learner.max_grad_norm)
            self.optimizer.step()
            steps += 1
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # the steps launched are counted once they have run
        return steps / (time.perf_counter() - t0)
