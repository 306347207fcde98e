"""Minibatches onto a learner's GPU ahead of their use: pinned host memory and ``non_blocking`` copies
on a side stream, so that the next minibatch travels while the current one trains (the fast-pipeline
article of docs/algorithms.md#sources)."""

from __future__ import annotations

import collections
from typing import Any

import numpy as np
import torch

from gorila.types import Batch

#: The fields of a :class:`Batch` that the loss reads on the device; indices and policy versions
#: stay numpy arrays on the host, where the learner's bookkeeping reads them.
DEVICE_FIELDS = ("obs", "action", "reward", "next_obs", "discount", "weights")

#: Host buffer sets that alternate: one holds the minibatch being copied while the other is filled.
SLOTS = 2


class DeviceCopy:
    """A learner's copies of replay minibatches to its device, the next one ahead of its use::

        copy = DeviceCopy("cuda", ahead=True)
        copy.stage(next_batch)       # into pinned host memory, then a non_blocking copy on a side stream
        batch = copy.take(batch)     # its fields on the device: the staged copy, or copied now
        loss, info = dqn_loss(online, target, batch)

    :meth:`stage` returns at once: the copy runs on its own CUDA stream while the caller launches
    this minibatch's forward and backward passes. :meth:`take` makes the compute stream wait for
    that copy's event (the host does not wait) and marks the tensors as used on it, so PyTorch's
    allocator keeps their memory until the compute that reads them is done. A batch that was not
    staged (the first, or one a learner could not see coming) is copied the same way when taken.
    The pinned buffers are reused: a slot is refilled only once the copy that last read it has
    finished.

    With ``ahead=False`` (``--device-copy sync``), or on a CPU device, :meth:`stage` does nothing
    and :meth:`take` returns the batch as it is: the loss then copies each array from pageable
    memory when it reads it, which blocks the host for every copy.
    """

    def __init__(self, device: str | torch.device, ahead: bool = True) -> None:
        self.device = torch.device(device)
        self.ahead = ahead and self.device.type == "cuda"
        # no-untyped-call: torch leaves the CUDA Stream and Event constructors unannotated
        self.stream = torch.cuda.Stream(self.device) if self.ahead else None  # type: ignore[no-untyped-call]
        self.pinned: list[dict[str, torch.Tensor]] = [{} for _ in range(SLOTS)]
        self.slot_done: list[torch.cuda.Event | None] = [None] * SLOTS
        self.next_slot = 0
        self.staged: collections.deque[tuple[Batch, dict[str, torch.Tensor], Any]] = collections.deque()
        self.copied_ahead = self.copied_when_used = 0

    def stage(self, batch: Batch) -> None:
        """Start copying ``batch`` to the device; it is taken by :meth:`take` (at most ``SLOTS`` staged)."""
        if not self.ahead:
            return
        if len(self.staged) >= SLOTS:
            self.staged.popleft()  # never taken: its slot is about to be refilled
        slot, self.next_slot = self.next_slot, (self.next_slot + 1) % SLOTS
        last_read = self.slot_done[slot]
        if last_read is not None:
            last_read.synchronize()  # the copy that last read this slot's host memory is done
        host = self._fill(slot, batch)
        with torch.cuda.stream(self.stream):
            on_device = {name: tensor.to(self.device, non_blocking=True) for name, tensor in host.items()}
            done = torch.cuda.Event()  # type: ignore[no-untyped-call]
            done.record(self.stream)
        self.slot_done[slot] = done
        self.staged.append((batch, on_device, done))

    def take(self, batch: Batch) -> Batch:
        """``batch`` with its :data:`DEVICE_FIELDS` on the device (unchanged when not copying ahead)."""
        if not self.ahead:
            return batch
        if self.staged and self.staged[0][0] is batch:
            _, on_device, done = self.staged.popleft()
            self.copied_ahead += 1
        else:  # not foreseen: copied now, the way a staged one is, and any staged one stays next
            self.stage(batch)
            _, on_device, done = self.staged.pop()
            self.copied_when_used += 1
        compute = torch.cuda.current_stream(self.device)
        compute.wait_event(done)
        for tensor in on_device.values():
            tensor.record_stream(compute)
        return batch._replace(**on_device)  # type: ignore[arg-type]  # the loss reads tensors where replay holds arrays

    def report(self) -> dict[str, int]:
        """How many minibatches were on their way before they were used, and how many were not."""
        return {"batches_copied_ahead": self.copied_ahead, "batches_copied_when_used": self.copied_when_used}

    def _fill(self, slot: int, batch: Batch) -> dict[str, torch.Tensor]:
        """``batch``'s device fields copied into ``slot``'s pinned buffers (reallocated when a shape changes)."""
        buffers = self.pinned[slot]
        for name in DEVICE_FIELDS:
            array = np.ascontiguousarray(getattr(batch, name))
            buffer = buffers.get(name)
            if buffer is None or buffer.shape != array.shape or buffer.numpy().dtype != array.dtype:
                buffer = buffers[name] = torch.from_numpy(array).pin_memory()
            else:
                buffer.numpy()[...] = array
        return dict(buffers)
