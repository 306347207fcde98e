"""A torch module's parameters as one flat float32 vector, the parameter server's unit."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


class FlatParams:
    """Moves a module's parameters and gradients to and from one flat float32 numpy vector::

        flat = FlatParams(net)
        w0 = flat.get()              # copy of all parameters, in ``net.parameters()`` order
        flat.set(w)                  # load a vector pulled from the server
        loss.backward(); g = flat.grad()   # gradients as one vector, ready to push

    The order is ``module.parameters()``; :meth:`slices` names where each tensor lives, so a
    caller can give parameter groups their own learning rates.
    """

    def __init__(self, module: nn.Module):
        self.module = module
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.sizes = [p.numel() for p in self.params]
        self.size = int(sum(self.sizes))
        self._grad = np.zeros(self.size, np.float32)

    def get(self) -> np.ndarray:
        with torch.no_grad():
            return torch.cat([p.detach().reshape(-1).cpu() for p in self.params]).numpy().astype(
                np.float32, copy=True)

    def set(self, flat: np.ndarray) -> None:
        if flat.shape != (self.size,):
            raise ValueError(f"expected a flat vector of {self.size} parameters, got shape {flat.shape}")
        source = torch.from_numpy(np.ascontiguousarray(flat, dtype=np.float32))
        offset = 0
        with torch.no_grad():
            for p, n in zip(self.params, self.sizes):
                p.copy_(source[offset:offset + n].view_as(p), non_blocking=True)
                offset += n

    def grad(self) -> np.ndarray:
        """The current ``.grad`` of every parameter as one vector (zeros where a grad is None).

        Returns this object's buffer: copy it to keep it past the next call."""
        offset = 0
        for p, n in zip(self.params, self.sizes):
            if p.grad is None:
                self._grad[offset:offset + n] = 0.0
            else:
                self._grad[offset:offset + n] = p.grad.detach().reshape(-1).cpu().numpy()
            offset += n
        return self._grad

    def slices(self) -> dict[str, slice]:
        """Name of each parameter -> its slice of the flat vector."""
        names = {id(p): name for name, p in self.module.named_parameters()}
        out, offset = {}, 0
        for p, n in zip(self.params, self.sizes):
            out[names[id(p)]] = slice(offset, offset + n)
            offset += n
        return out


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
