"""A torch module's parameters as one flat float32 vector, the parameter server's unit."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn


class FlatParams:
    """A module's parameters and gradients, each kept in one contiguous float32 buffer::

        flat = FlatParams(net)       # after net.to(device): moving it later would undo the buffer
        w0 = flat.get()              # copy of all parameters, in ``net.parameters()`` order
        flat.set(w)                  # load a vector pulled from the server: one copy
        flat.zero_grad(); loss.backward()
        g = flat.grad()              # gradients as one vector, ready to push: no copy

    Construction makes every parameter a view into the parameter buffer, and :meth:`zero_grad`
    makes every ``.grad`` a view into the gradient buffer, which backward then accumulates into:
    a small network's update would otherwise spend a visible share of its time copying tensor by
    tensor. Code that replaces a ``.grad`` (``zero_grad(set_to_none=True)``) detaches it from the
    buffer; :meth:`grad` then copies it in (reading a missing one as zeros) and :meth:`zero_grad`
    attaches it again. A second ``FlatParams`` of the same module shares both buffers.

    The order is ``module.parameters()``; :meth:`slices` names where each tensor lives, so a
    caller can give parameter groups their own learning rates.
    """

    def __init__(self, module: nn.Module):
        self.module = module
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.sizes = [p.numel() for p in self.params]
        self.size = int(sum(self.sizes))
        for p in self.params:
            if p.dtype != torch.float32 or p.device != self.params[0].device:
                raise ValueError("FlatParams needs float32 parameters, all on one device")
        device = self.params[0].device if self.params else torch.device("cpu")
        flat = _shared_buffer(self.params, self.size)
        if flat is None:
            flat = torch.cat([p.detach().reshape(-1) for p in self.params]) if self.params \
                else torch.zeros(0, device=device)
            with torch.no_grad():
                for p, view in zip(self.params, self._views(flat)):
                    p.data = view
        self._flat: torch.Tensor = flat
        flat_grad = _shared_buffer([p.grad for p in self.params], self.size)
        if flat_grad is None:
            flat_grad = torch.zeros(self.size, device=device)
        self._flat_grad: torch.Tensor = flat_grad
        self._grad_views = self._views(self._flat_grad)
        # numpy views for the CPU case: grad() then hands out the buffer itself.
        self._grad_np = self._flat_grad.numpy() if device.type == "cpu" else None

    def __getstate__(self) -> dict:
        # the numpy view of the gradient buffer is made again on load: pickled, it would be a copy
        return {k: v for k, v in self.__dict__.items() if k != "_grad_np"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._grad_np = self._flat_grad.numpy() if self._flat_grad.device.type == "cpu" else None

    def get(self) -> np.ndarray:
        return self._flat.detach().cpu().numpy().astype(np.float32, copy=True)

    def set(self, flat: np.ndarray) -> None:
        if flat.shape != (self.size,):
            raise ValueError(f"expected a flat vector of {self.size} parameters, got shape {flat.shape}")
        with torch.no_grad():
            self._flat.copy_(torch.from_numpy(np.ascontiguousarray(flat, dtype=np.float32)))

    def state_dict(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        """The module's named ``state_dict`` with ``flat`` as its parameters, as numpy arrays that
        own their memory (the module's tensors are views of one buffer, which safetensors refuses)::

            safetensors.numpy.save_file(FlatParams(net).state_dict(w), "model.safetensors")
            net.load_state_dict(safetensors.torch.load_file("model.safetensors"))   # plain PyTorch
        """
        self.set(flat)
        return {name: tensor.detach().cpu().numpy().copy() for name, tensor in self.module.state_dict().items()}

    def zero_grad(self) -> None:
        """Zero the gradient buffer in place and make every ``.grad`` a view of it again."""
        self._flat_grad.zero_()
        for p, view in zip(self.params, self._grad_views):
            if p.grad is not view:
                p.grad = view

    def clip_grad_norm_(self, max_norm: float | None) -> float:
        """``torch.nn.utils.clip_grad_norm_`` of the parameters' gradients, computed on the buffer:
        returns their norm before clipping; ``max_norm=None`` only measures it."""
        self._sync_grads()
        norm = torch.linalg.vector_norm(self._flat_grad)
        if max_norm is not None:
            self._flat_grad.mul_(torch.clamp(max_norm / (norm + 1e-6), max=1.0))
        return float(norm)

    def grad(self) -> np.ndarray:
        """The current ``.grad`` of every parameter as one vector (zeros where a grad is None).

        Returns this object's buffer: copy it to keep it past the next ``zero_grad`` or backward."""
        self._sync_grads()
        if self._grad_np is not None:
            return self._grad_np
        return self._flat_grad.cpu().numpy()

    def slices(self) -> dict[str, slice]:
        """Name of each parameter -> its slice of the flat vector."""
        names = {id(p): name for name, p in self.module.named_parameters()}
        out, offset = {}, 0
        for p, n in zip(self.params, self.sizes):
            out[names[id(p)]] = slice(offset, offset + n)
            offset += n
        return out

    def _views(self, buffer: torch.Tensor) -> list[torch.Tensor]:
        return [part.view_as(p) for part, p in zip(torch.split(buffer, self.sizes), self.params)]

    def _sync_grads(self) -> None:
        """Copy into the buffer any ``.grad`` that is not (or no longer) a view of it."""
        with torch.no_grad():
            for p, view in zip(self.params, self._grad_views):
                if p.grad is view:
                    continue
                if p.grad is None:
                    view.zero_()
                else:
                    view.copy_(p.grad)


def _shared_buffer(tensors: Sequence[torch.Tensor | None], size: int) -> torch.Tensor | None:
    """The flat tensor that ``tensors`` already are consecutive views of, in order, or None."""
    present = [t for t in tensors if t is not None and t.is_contiguous()]
    if not present or len(present) != len(tensors):
        return None
    storage = present[0].untyped_storage()
    if storage.nbytes() != size * 4:
        return None
    offset = 0
    for t in present:
        if t.untyped_storage().data_ptr() != storage.data_ptr() or t.storage_offset() != offset:
            return None
        offset += t.numel()
    return torch.empty(0, dtype=torch.float32, device=present[0].device).set_(storage, 0, (size,), (1,))


def soft_update(target: np.ndarray, online: np.ndarray, tau: float) -> np.ndarray:
    """``tau * online + (1 - tau) * target`` as a new float32 vector; ``tau = 1`` copies ``online``.

    The soft target-network update of DQN (``--target-update soft:TAU``) and A3C (``--target-tau``)."""
    if not 0.0 < tau <= 1.0:
        raise ValueError(f"tau must be in (0, 1], got {tau!r}")
    if target.shape != online.shape:
        raise ValueError(f"target has shape {target.shape}, online {online.shape}")
    if tau == 1.0:
        return np.array(online, dtype=np.float32, copy=True)
    tau32 = np.float32(tau)
    return (tau32 * online + (np.float32(1.0) - tau32) * target).astype(np.float32, copy=False)
