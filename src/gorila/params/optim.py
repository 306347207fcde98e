"""Server-side optimizers on flat float32 numpy slices.

Each optimizer updates ``params`` in place from an (already averaged) gradient and keeps
its own state, which ``state_dict`` / ``load_state_dict`` save and restore exactly::

    opt = make_optimizer("adam", size=params.size, lr=1e-3)
    opt.step(params, grad)

``lr`` may be a scalar, a float32 vector of the slice's length (one learning rate per
parameter, e.g. separate rates for a policy and a value head), or a ``LinearDecay`` (a
scalar rate falling linearly to 0 over a number of steps: PPO's ``--lr-decay linear``;
:mod:`gorila.params.learning_rate`).

A slice of :data:`TORCH_FROM` parameters or more steps with torch's fused in-place operations
on tensors that share memory with the numpy arrays: ``w.add_(g, alpha=-lr)`` reads and writes
each element once, where numpy needs a temporary and several passes. On a Nature-CNN-sized
vector this makes an SGD step about three times faster, and the step is most of a
parameter-server round trip. A smaller slice steps with numpy ufuncs writing into buffers
allocated once: on a few thousand parameters a ufunc call costs less than a torch op, and a
shard process that builds only such optimizers never imports torch (about 150 MiB of memory
per process).
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from gorila import validate
from gorila.params.learning_rate import LearningRate, LinearDecay

if TYPE_CHECKING:
    import torch
else:
    torch = None  # imported by the first optimizer built: processes that build none never pay for torch


def _load_torch() -> None:
    global torch
    if torch is None:
        torch = importlib.import_module("torch")

OPTIMIZERS = ("sgd", "momentum", "adagrad", "rmsprop", "adam")
#: Slices at least this long step with torch; shorter ones with numpy (see the module's docstring).
TORCH_FROM = 1 << 15


# Gradients often arrive as read-only arrays (Ray's object store, a client's shared-memory
# slot). Torch warns that it cannot protect them; the optimizers only ever read them.
warnings.filterwarnings("ignore", message="The given NumPy array is not writable", category=UserWarning)


def all_finite(x: np.ndarray) -> bool:
    """Exactly ``np.isfinite(x).all()``, usually in one read with no temporary array.

    A sum of squares is finite only if every element is: a nan or an infinity makes its term
    nan or +inf, and no term is negative to cancel an infinity. Only when squares of finite
    values overflow (|x| above ~1e19) does the elementwise check decide.
    """
    with np.errstate(over="ignore", invalid="ignore"):  # overflow here is expected, not news
        square_sum = np.dot(x, x)
    return bool(np.isfinite(square_sum)) or bool(np.isfinite(x).all())


class ServerOptimizer(Protocol):
    """What a :class:`~gorila.params.ParameterShard` needs from an optimizer: ``step`` as it is,
    ``step_finite`` undone unless parameters and state stay finite (whether it stood)."""

    def step(self, params: np.ndarray, grad: np.ndarray) -> None: ...
    def step_finite(self, params: np.ndarray, grad: np.ndarray) -> bool: ...
    def state_dict(self) -> dict[str, np.ndarray]: ...
    def load_state_dict(self, state: dict[str, np.ndarray]) -> None: ...


class _Base:
    """Shared plumbing: subclasses list their state arrays in ``_slots`` and write the update
    before the learning rate into buffers of their own: ``_direction`` on torch tensors (slices of
    :data:`TORCH_FROM` or more), ``_direction_np`` on numpy arrays."""

    _slots: tuple[str, ...] = ()
    # What _torch_views makes: tensors on the arrays' memory, which a copy must not carry (see __getstate__).
    _torch_attrs: tuple[str, ...] = ("_tmp", "_lr_vector", "_state", "_arrays", "_torch_ready")

    def __init__(self, size: int, lr: LearningRate, state: dict[str, np.ndarray] | None = None):
        self.uses_torch = size >= TORCH_FROM
        self.decay = lr if isinstance(lr, LinearDecay) else None
        self.lr = _check_lr(lr.lr if isinstance(lr, LinearDecay) else lr, size)
        for slot in self._slots:  # the caller's arrays (e.g. shared memory), or fresh zeros
            setattr(self, slot, np.zeros(size, np.float32) if state is None else state[slot])
        self.size = size
        if not self.uses_torch:
            self._tmp_np = np.empty(size, np.float32)  # scratch, so a step allocates nothing
        self.steps = 0
        self._saved: dict[str, np.ndarray] = {}  # step_finite's copies, allocated by its first call
        self._view_arrays()

    def _view_arrays(self) -> None:
        # The step writes the state arrays themselves (through tensors sharing their memory on the
        # torch path), which state_dict, load_state_dict and step_finite's check and undo read and write.
        self._arrays: dict[str, np.ndarray] = {slot: getattr(self, slot) for slot in self._slots}
        self._torch_ready = False  # the tensors are made by the first step (_torch_views)

    def _torch_views(self) -> None:
        # Made when first needed: a shard that never steps (the store of a learner that owns its
        # parameters) never imports torch, a few seconds of a process's start.
        _load_torch()
        self._tmp = torch.empty(self.size, dtype=torch.float32)  # scratch, so a step allocates nothing
        self._lr_vector = torch.from_numpy(self.lr) if isinstance(self.lr, np.ndarray) else None
        self._state = {slot: torch.from_numpy(getattr(self, slot)) for slot in self._slots}
        self._torch_ready = True

    def __getstate__(self) -> dict[str, Any]:
        # Pickled (or deep-copied) tensors would come back with memory of their own, no longer the
        # arrays': the step would move tensors that state_dict and the finite check never read.
        return {k: v for k, v in self.__dict__.items() if k not in self._torch_attrs}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._view_arrays()

    def step(self, params: np.ndarray, grad: np.ndarray) -> None:
        step = self.steps
        self.steps += 1
        if not self.uses_torch:
            # The direction may be the gradient itself (read-only): the scaled step goes to scratch.
            lr = self.lr if self.decay is None else np.float32(self.decay.at(step))
            scaled = np.multiply(self._direction_np(grad), lr, out=self._tmp_np)
            np.subtract(params, scaled, out=params)
            return
        if not self._torch_ready:
            self._torch_views()
        direction = self._direction(torch.from_numpy(grad))
        w = torch.from_numpy(params)
        if self._lr_vector is None:
            w.add_(direction, alpha=-self._scalar_rate(step))
        else:
            w.addcmul_(direction, self._lr_vector, value=-1.0)

    def _scalar_rate(self, step: int) -> float:
        """The learning rate of step ``step`` (0 for the first) where it is one number: the scalar, or
        the decay's value then."""
        return float(self.lr) if self.decay is None else self.decay.at(step)

    def step_finite(self, params: np.ndarray, grad: np.ndarray) -> bool:
        """:meth:`step`, undone when it leaves a parameter or a state value NaN or infinite (a
        finite but huge gradient overflows them as surely as a NaN one): parameters, state and the
        step count are then as before, bit for bit. Whether the step stood.

        The copies it is undone from go into buffers allocated once, so the check costs a copy
        and a read of each array per step, and nothing is allocated."""
        if not self._saved:
            self._saved = {name: np.empty_like(params) for name in ("params", *self._slots)}
        np.copyto(self._saved["params"], params)
        for slot in self._slots:
            np.copyto(self._saved[slot], getattr(self, slot))
        self.step(params, grad)
        if all_finite(params) and all(all_finite(getattr(self, slot)) for slot in self._slots):
            return True
        np.copyto(params, self._saved["params"])
        for slot in self._slots:
            np.copyto(getattr(self, slot), self._saved[slot])
        self.steps -= 1
        return False

    def _direction(self, g: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _direction_np(self, g: np.ndarray) -> np.ndarray:
        raise NotImplementedError

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

    def _direction(self, g: torch.Tensor) -> torch.Tensor:
        return g

    def _direction_np(self, g: np.ndarray) -> np.ndarray:
        return g


class Momentum(_Base):
    """Heavy-ball momentum: ``v <- mu * v + g``; ``w <- w - lr * v``."""

    _slots = ("velocity",)

    def __init__(self, size: int, lr: LearningRate, state: dict[str, np.ndarray] | None = None,
                 momentum: float = 0.9):
        super().__init__(size, lr, state)
        self.momentum = float(momentum)

    def _direction(self, g: torch.Tensor) -> torch.Tensor:
        return self._state["velocity"].mul_(self.momentum).add_(g)

    def _direction_np(self, g: np.ndarray) -> np.ndarray:
        velocity = self._arrays["velocity"]
        np.multiply(velocity, np.float32(self.momentum), out=velocity)
        np.add(velocity, g, out=velocity)
        return velocity


class AdaGrad(_Base):
    """AdaGrad (Gorila's server optimizer): ``G <- G + g^2``; ``w <- w - lr * g / (sqrt(G) + eps)``."""

    _slots = ("sum_sq",)

    def __init__(self, size: int, lr: LearningRate, state: dict[str, np.ndarray] | None = None, eps: float = 1e-8):
        super().__init__(size, lr, state)
        self.eps = float(eps)

    def _direction(self, g: torch.Tensor) -> torch.Tensor:
        sum_sq = self._state["sum_sq"].addcmul_(g, g)
        return torch.div(g, torch.sqrt(sum_sq, out=self._tmp).add_(self.eps), out=self._tmp)

    def _direction_np(self, g: np.ndarray) -> np.ndarray:
        tmp, sum_sq = self._tmp_np, self._arrays["sum_sq"]
        np.add(sum_sq, np.multiply(g, g, out=tmp), out=sum_sq)
        np.add(np.sqrt(sum_sq, out=tmp), np.float32(self.eps), out=tmp)
        np.divide(g, tmp, out=tmp)
        return tmp


class RMSProp(_Base):
    """RMSProp: ``S <- rho * S + (1 - rho) * g^2``; ``w <- w - lr * g / (sqrt(S) + eps)``."""

    _slots = ("mean_sq",)

    def __init__(self, size: int, lr: LearningRate, state: dict[str, np.ndarray] | None = None,
                 rho: float = 0.99, eps: float = 1e-5):
        super().__init__(size, lr, state)
        self.rho, self.eps = float(rho), float(eps)

    def step(self, params: np.ndarray, grad: np.ndarray) -> None:
        """On the torch path with one learning rate (or its decay), the parameters move by
        ``addcdiv_`` (as torch's own RMSprop does): one pass over the slice fewer than the
        direction's division and its scaled add. The same formula."""
        if not self.uses_torch or isinstance(self.lr, np.ndarray):
            super().step(params, grad)
            return
        if not self._torch_ready:
            self._torch_views()
        step = self.steps
        self.steps += 1
        g = torch.from_numpy(grad)
        mean_sq = self._state["mean_sq"].mul_(self.rho).addcmul_(g, g, value=1 - self.rho)
        denominator = torch.sqrt(mean_sq, out=self._tmp).add_(self.eps)
        torch.from_numpy(params).addcdiv_(g, denominator, value=-self._scalar_rate(step))

    def _direction(self, g: torch.Tensor) -> torch.Tensor:
        mean_sq = self._state["mean_sq"].mul_(self.rho).addcmul_(g, g, value=1 - self.rho)
        return torch.div(g, torch.sqrt(mean_sq, out=self._tmp).add_(self.eps), out=self._tmp)

    def _direction_np(self, g: np.ndarray) -> np.ndarray:
        tmp, mean_sq = self._tmp_np, self._arrays["mean_sq"]
        np.multiply(mean_sq, np.float32(self.rho), out=mean_sq)
        np.multiply(np.multiply(g, g, out=tmp), np.float32(1 - self.rho), out=tmp)
        np.add(mean_sq, tmp, out=mean_sq)
        np.add(np.sqrt(mean_sq, out=tmp), np.float32(self.eps), out=tmp)
        np.divide(g, tmp, out=tmp)
        return tmp


class Adam(_Base):
    """Adam with bias correction (Kingma & Ba)."""

    _slots = ("m", "v")
    _torch_attrs = (*_Base._torch_attrs, "_count", "_fused_adam")

    def __init__(self, size: int, lr: LearningRate, state: dict[str, np.ndarray] | None = None,
                 beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8):
        super().__init__(size, lr, state)
        self.beta1, self.beta2, self.eps = float(beta1), float(beta2), float(eps)

    def step(self, params: np.ndarray, grad: np.ndarray) -> None:
        """On the torch path with one learning rate (or its decay), torch's fused Adam
        (``torch.optim.adam.adam(fused=True)``, torch 2.4 or later) on tensors sharing the arrays'
        memory: one pass over the slice instead of seven, less than half the time of
        :meth:`_direction`'s in-place operations on a 141 k-parameter slice. The same formula."""
        if self.uses_torch and not self._torch_ready:
            self._torch_views()
        if not self.uses_torch or self._fused_adam is None:
            super().step(params, grad)
            return
        step = self.steps
        self.steps += 1
        self._count.fill_(step)  # torch's Adam adds this step to its count before the bias correction
        self._fused_adam(
            [torch.from_numpy(params)], [torch.from_numpy(grad)], [self._state["m"]], [self._state["v"]], [],
            [self._count], fused=True, amsgrad=False, beta1=self.beta1, beta2=self.beta2,
            lr=self._scalar_rate(step), weight_decay=0.0, eps=self.eps,
            maximize=False)

    def _torch_views(self) -> None:
        super()._torch_views()
        self._count = torch.zeros((), dtype=torch.float32)
        # torch's functional Adam, fused on the CPU from torch 2.4, for one rate (a vector of rates: _direction)
        fused = tuple(int(part) for part in torch.__version__.split(".")[:2]) >= (2, 4)
        self._fused_adam = (importlib.import_module("torch.optim.adam").adam
                            if fused and not isinstance(self.lr, np.ndarray) else None)

    def _direction(self, g: torch.Tensor) -> torch.Tensor:
        m = self._state["m"].mul_(self.beta1).add_(g, alpha=1 - self.beta1)
        v = self._state["v"].mul_(self.beta2).addcmul_(g, g, value=1 - self.beta2)
        bias1 = 1 - self.beta1 ** self.steps
        bias2 = 1 - self.beta2 ** self.steps
        # m_hat / (sqrt(v_hat) + eps), with v_hat = v / bias2 and m_hat = m / bias1
        denom = torch.sqrt(v, out=self._tmp).div_(bias2 ** 0.5).add_(self.eps)
        return torch.div(m, denom, out=self._tmp).div_(bias1)

    def _direction_np(self, g: np.ndarray) -> np.ndarray:
        tmp, m, v = self._tmp_np, self._arrays["m"], self._arrays["v"]
        np.multiply(m, np.float32(self.beta1), out=m)
        np.add(m, np.multiply(g, np.float32(1 - self.beta1), out=tmp), out=m)
        np.multiply(v, np.float32(self.beta2), out=v)
        np.multiply(np.multiply(g, g, out=tmp), np.float32(1 - self.beta2), out=tmp)
        np.add(v, tmp, out=v)
        bias1 = 1 - self.beta1 ** self.steps
        bias2 = 1 - self.beta2 ** self.steps
        np.divide(np.sqrt(v, out=tmp), np.float32(bias2 ** 0.5), out=tmp)
        np.add(tmp, np.float32(self.eps), out=tmp)
        np.divide(np.divide(m, tmp, out=tmp), np.float32(bias1), out=tmp)
        return tmp


_CLASSES: dict[str, type[_Base]] = {"sgd": SGD, "momentum": Momentum, "adagrad": AdaGrad, "rmsprop": RMSProp,
                                    "adam": Adam}


def make_optimizer(name: str, size: int, lr: LearningRate, state: dict[str, np.ndarray] | None = None
                   ) -> ServerOptimizer:
    """The optimizer ``name`` (one of :data:`OPTIMIZERS`) for a slice of ``size`` parameters; its
    state lives in ``state``'s arrays when given (one per :func:`optimizer_slots` name), else in
    its own."""
    validate.choice("optimizer", name, OPTIMIZERS)
    return _CLASSES[name](size, lr, state)


def optimizer_slots(name: str) -> tuple[str, ...]:
    """The names of the state arrays (each as long as the slice) optimizer ``name`` keeps."""
    validate.choice("optimizer", name, OPTIMIZERS)
    return _CLASSES[name]._slots


def _check_lr(lr: float | np.ndarray, size: int) -> np.float32 | np.ndarray:
    if isinstance(lr, np.ndarray):
        if lr.shape != (size,):
            raise ValueError(f"lr vector must have shape ({size},), got {lr.shape}")
        if not np.all(np.isfinite(lr)) or np.any(lr < 0):
            raise ValueError("lr vector must be finite and >= 0")
        return lr.astype(np.float32, copy=False)
    validate.number("lr", lr, low=0.0, low_open=True)
    return np.float32(lr)
