"""The Q-learning learner: double-Q (or max-Q) gradients with its own target network."""

from __future__ import annotations

import collections
import copy
from collections.abc import Callable

import numpy as np
from torch import nn

from gorila.learners.device_copy import DeviceCopy
from gorila.learners.target import TargetUpdate
from gorila.losses.dqn import dqn_loss
from gorila.nets import FlatParams
from gorila.types import Batch


class OutlierFilter:
    """Gorila's safeguard: a loss above the running mean + ``k``·std of recent losses is an
    outlier, and is left out of the statistics. With ``k=None`` nothing is::

        outliers = OutlierFilter(k=3.0)
        if outliers.is_outlier(loss): skip the push
    """

    def __init__(self, k: float | None, window: int = 100, warmup: int = 20):
        self.k, self.warmup = k, warmup
        self.losses: collections.deque[float] = collections.deque(maxlen=window)

    def is_outlier(self, loss: float) -> bool:
        outlier = (self.k is not None and len(self.losses) >= self.warmup
                   and abs(loss) > np.mean(self.losses) + self.k * np.std(self.losses))
        if not outlier:
            self.losses.append(abs(loss))
        return bool(outlier)


class QLearner:
    """Q-learning gradients on the parameters it is given (the :class:`~gorila.core.Learner` role)::

        learner = QLearner(network_fn, loss="huber", target="double", target_update=TargetUpdate.hard(200),
                           outlier_k=None, max_grad_norm=10.0)
        grad, info = learner.gradient(params, version, batch)   # grad is None for a skipped outlier
        info["td_abs"]                                          # |TD error| per row: new priorities

    ``target="double"`` bootstraps from the target network's value of the online network's best
    action (van Hasselt et al. 2016, the textbook's asynchronous learner); ``"max"`` from the target
    network's own maximum (Mnih et al. 2015, as Gorila did). The target network follows the given
    parameters as ``target_update`` says, counted in *global* updates (the version). Rows are
    weighted by the batch's importance weights. The returned gradient is this learner's buffer:
    push it before the next call.

    On a GPU with ``copy_ahead`` (``--device-copy async``), a worker that knows its next minibatch
    hands it to :meth:`stage` before asking for this one's gradient: it is copied to the device
    while this one trains (:class:`~gorila.learners.device_copy.DeviceCopy`); ``stages_ahead``
    says whether this learner does that.
    """

    def __init__(self, network_fn: Callable[[], nn.Module], *, loss: str, target: str,
                 target_update: TargetUpdate, outlier_k: float | None, max_grad_norm: float | None,
                 device: str = "cpu", copy_ahead: bool = True):
        self.loss, self.target_kind = loss, target
        self.target_update, self.max_grad_norm = target_update, max_grad_norm
        self.online = network_fn().to(device)
        self.target = copy.deepcopy(self.online)
        self.flat = FlatParams(self.online)
        self.target_flat = FlatParams(self.target)
        self.target_params: np.ndarray | None = None
        self.target_version = -1
        self.outliers = OutlierFilter(outlier_k)
        self.skipped_outliers = 0
        self.device_copy = DeviceCopy(device, ahead=copy_ahead)
        self.stages_ahead = self.device_copy.ahead

    def stage(self, batch: Batch) -> None:
        """Start copying a coming minibatch to the device (nothing unless ``stages_ahead``)."""
        self.device_copy.stage(batch)

    def gradient(self, params: np.ndarray, version: int, batch: Batch) -> tuple[np.ndarray | None, dict]:
        moved = self.target_update.follow(self.target_params, self.target_version, params, version)
        if moved is not None:  # a hard target copies only when due: no copy on the hot path
            self.target_params, self.target_version = moved
            self.target_flat.set(self.target_params)
        self.flat.set(params)
        # Zeroed in place: backward accumulates straight into the flat buffer that is pushed.
        self.flat.zero_grad()
        loss, info = dqn_loss(self.online, self.target, self.device_copy.take(batch), self.loss, self.target_kind)
        if self.outliers.is_outlier(info["loss"]):
            self.skipped_outliers += 1
            return None, info
        loss.backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
        if self.max_grad_norm is not None:
            self.flat.clip_grad_norm_(self.max_grad_norm)
        return self.flat.grad(), info
