"""Observations as a network's input: a batch of numpy observations turned into a tensor."""

from __future__ import annotations

import numpy as np
import torch


def module_device(net: torch.nn.Module) -> torch.device:
    """Where ``net``'s parameters live: its inputs are put there."""
    return next(net.parameters()).device


def observation_tensor(obs: np.ndarray, device: torch.device) -> torch.Tensor:
    """A batch of observations as a network's input on ``device``::

        q = net(observation_tensor(runner.observations, module_device(net)))

    On the CPU they are cast to float32 here: numpy casts a few envs' booleans or bytes several
    times faster than torch's ``.float()``, which then costs nothing in the network. Toward an
    accelerator they cross as they are (a byte per cell or pixel, a quarter of float32) and the
    network casts them there (other floats than float32 are cast there too). The values are the
    same either way.
    """
    if device.type == "cpu":
        return torch.as_tensor(np.asarray(obs, dtype=np.float32))
    tensor = torch.as_tensor(obs).to(device, non_blocking=True)
    return tensor.float() if tensor.is_floating_point() else tensor
