"""CPU time of this process, so a run can report CPU seconds per step as well as wall time.

Each worker process measures its own and reports it; the driver adds them up::

    clock = CpuClock()
    ...                       # work
    report["cpu_s"] = clock.seconds()
"""

from __future__ import annotations

import psutil


def process_cpu_seconds() -> float:
    """User plus system CPU seconds this process has used so far (all its threads)."""
    times = psutil.Process().cpu_times()
    return times.user + times.system


class CpuClock:
    """CPU seconds this process has used since the clock was created.

    Create it in the process being measured: the reading is always of the process that
    calls :meth:`seconds`, so a clock made in the driver and shipped to a worker would
    subtract the driver's start from the worker's total.
    """

    def __init__(self) -> None:
        self._start = process_cpu_seconds()

    def seconds(self) -> float:
        """CPU seconds used since construction."""
        return process_cpu_seconds() - self._start
