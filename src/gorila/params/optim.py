"""Server-side optimizers on flat float32 numpy slices.

Each optimizer updates ``params`` in place from an (already averaged) gradient and keeps
its own state, which ``state_dict`` / ``load_state_dict`` save and restore exactly::

    opt = make_optimizer("adam", size=params.size, lr=1e-3)
    opt.step(params, grad)

``lr`` may be a scalar or a float32 vector of the slice's length (one learning rate per
parameter, e.g. separate rates for a policy and a value head).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from gorila import validate

OPTIMIZERS = ("sgd", "momentum", "adagrad", "rmsprop", "adam")

LearningRate = float | np.ndarray


class ServerOptimizer(Protocol):
    """What a :class:`~gorila.params.ParameterShard` needs from an optimizer."""

    def step(self, params: np.ndarray, grad: np.ndarray) -> None: ...
    def state_dict(self) -> dict[str, np.ndarray]: ...
    def load_state_dict(self, state: dict[str, np.ndarray]) -> None: ...


class _Base:
    """Shared state plumbing: subclasses list their state arrays in ``_slots``."""

    _slots: tuple[str, ...] = ()

    def __init__(self, size: int, lr: LearningRate):
        self.lr = _check_lr(lr, size)
        self._tmp = np.empty(size, np.float32)  # scratch, so a step allocates nothing
        for slot in self._slots:
            setattr(self, slot, np.zeros(size, np.float32))
        self.steps = 0

    def state_dict(self) -> dict[str, np.ndarray]:
        state = {slot: getattr(self, slot).copy() for slot in self._slots}
        state["steps"] = np.array([self.steps], np.int64)  # 1-d: checkpoint formats drop 0-d shapes
        return state

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        for slot in self._slots:
            np.copyto(getattr(self, slot), state[slot])
        self.steps = int(state["steps"][0])


class SGD(_Base):
    """``w <- w - lr * g``."""

    # Blocks small enough that the scratch stays in cache: one pass over memory instead of two.
    _BLOCK = 1 << 15

    def step(self, params: np.ndarray, grad: np.ndarray) -> None:
        per_param = isinstance(self.lr, np.ndarray)
        for start in range(0, params.size, self._BLOCK):
            block = slice(start, start + self._BLOCK)
            tmp = self._tmp[block]
            np.multiply(grad[block], self.lr[block] if per_param else self.lr, out=tmp)
            params[block] -= tmp
        self.steps += 1


class Momentum(_Base):
    """Heavy-ball momentum: ``v <- mu * v + g``; ``w <- w - lr * v``."""

    _slots = ("velocity",)

    def __init__(self, size: int, lr: LearningRate, momentum: float = 0.9):
        super().__init__(size, lr)
        self.momentum = np.float32(momentum)

    def step(self, params: np.ndarray, grad: np.ndarray) -> None:
        self.velocity *= self.momentum
        self.velocity += grad
        np.multiply(self.velocity, self.lr, out=self._tmp)
        params -= self._tmp
        self.steps += 1


class AdaGrad(_Base):
    """AdaGrad (Gorila's server optimizer): ``G <- G + g^2``; ``w <- w - lr * g / (sqrt(G) + eps)``."""

    _slots = ("sum_sq",)

    def __init__(self, size: int, lr: LearningRate, eps: float = 1e-8):
        super().__init__(size, lr)
        self.eps = np.float32(eps)

    def step(self, params: np.ndarray, grad: np.ndarray) -> None:
        np.multiply(grad, grad, out=self._tmp)
        self.sum_sq += self._tmp
        np.sqrt(self.sum_sq, out=self._tmp)
        self._tmp += self.eps
        np.divide(grad, self._tmp, out=self._tmp)
        self._tmp *= self.lr
        params -= self._tmp
        self.steps += 1


class RMSProp(_Base):
    """RMSProp: ``S <- rho * S + (1 - rho) * g^2``; ``w <- w - lr * g / (sqrt(S) + eps)``."""

    _slots = ("mean_sq",)

    def __init__(self, size: int, lr: LearningRate, rho: float = 0.99, eps: float = 1e-5):
        super().__init__(size, lr)
        self.rho, self.eps = np.float32(rho), np.float32(eps)

    def step(self, params: np.ndarray, grad: np.ndarray) -> None:
        self.mean_sq *= self.rho
        np.multiply(grad, grad, out=self._tmp)
        self._tmp *= 1 - self.rho
        self.mean_sq += self._tmp
        np.sqrt(self.mean_sq, out=self._tmp)
        self._tmp += self.eps
        np.divide(grad, self._tmp, out=self._tmp)
        self._tmp *= self.lr
        params -= self._tmp
        self.steps += 1


class Adam(_Base):
    """Adam with bias correction (Kingma & Ba)."""

    _slots = ("m", "v")

    def __init__(self, size: int, lr: LearningRate, beta1: float = 0.9, beta2: float = 0.999,
                 eps: float = 1e-8):
        super().__init__(size, lr)
        self.beta1, self.beta2, self.eps = np.float32(beta1), np.float32(beta2), np.float32(eps)

    def step(self, params: np.ndarray, grad: np.ndarray) -> None:
        self.steps += 1
        self.m *= self.beta1
        self.m += (1 - self.beta1) * grad
        self.v *= self.beta2
        np.multiply(grad, grad, out=self._tmp)
        self._tmp *= 1 - self.beta2
        self.v += self._tmp
        bias1 = 1 - float(self.beta1) ** self.steps
        bias2 = 1 - float(self.beta2) ** self.steps
        np.sqrt(self.v / bias2, out=self._tmp)
        self._tmp += self.eps
        np.divide(self.m / bias1, self._tmp, out=self._tmp)
        self._tmp *= self.lr
        params -= self._tmp


_CLASSES = {"sgd": SGD, "momentum": Momentum, "adagrad": AdaGrad, "rmsprop": RMSProp, "adam": Adam}


def make_optimizer(name: str, size: int, lr: LearningRate) -> ServerOptimizer:
    """The optimizer ``name`` (one of :data:`OPTIMIZERS`) for a slice of ``size`` parameters."""
    validate.choice("optimizer", name, OPTIMIZERS)
    return _CLASSES[name](size, lr)


def _check_lr(lr: LearningRate, size: int) -> LearningRate:
    if isinstance(lr, np.ndarray):
        if lr.shape != (size,):
            raise ValueError(f"lr vector must have shape ({size},), got {lr.shape}")
        if not np.all(np.isfinite(lr)) or np.any(lr < 0):
            raise ValueError("lr vector must be finite and >= 0")
        return lr.astype(np.float32, copy=False)
    validate.number("lr", lr, low=0.0, low_open=True)
    return np.float32(lr)
