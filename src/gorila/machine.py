"""What the machine a run starts on has, as presets scale their process counts to it and the
sizing check weighs a run against it::

    Machine.here()                               # this machine: its CPUs, the memory free now
    Machine.here().replays_that_fit(1_000_000)   # how many 1 M-row Atari replays its memory holds
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

ATARI_FRAMES = (4, 84, 84)  # a replay row's stacked frames (DQN's preprocessing), uint8


@dataclass(frozen=True)
class Machine:
    """What a preset scales its process counts to: CPUs and the memory free now::

        Machine.here()                 # this machine
        Machine(cpus=16, memory_bytes=64 * 2**30)
    """

    cpus: int
    memory_bytes: int

    @classmethod
    def here(cls) -> Machine:
        import psutil  # type: ignore[import-untyped]  # psutil ships no type hints

        return cls(os.cpu_count() or 1, int(psutil.virtual_memory().available))

    def replays_that_fit(self, capacity: int, obs_shape: tuple[int, ...] = ATARI_FRAMES) -> int:
        """How many replays of ``capacity`` Atari rows fit in the memory a run may take (at least 1:
        the replay memory check then refuses a run that cannot fit even one, saying why)."""
        from gorila.replay.memory import MAX_FRACTION, estimate_storage_bytes

        need = estimate_storage_bytes(capacity, obs_shape, np.uint8)
        return max(1, int(MAX_FRACTION * self.memory_bytes // need))
