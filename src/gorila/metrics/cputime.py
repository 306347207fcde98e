"""CPU time of this process, so a run can report CPU seconds per step as well as wall time; and
when the process started, which its start-up figures count from.

Each worker process measures its own and reports it; the driver adds them up::

    clock = CpuClock()
    ...                       # work
    report["cpu_s"] = clock.seconds()
"""

from __future__ import annotations

import os
import time

import psutil  # type: ignore[import-untyped]  # psutil ships no type hints


def process_start_time() -> float:
    """When this process started, as a ``time.time()`` value.

    psutil's ``create_time`` adds the process's start, in clock ticks since boot, to the boot
    time that ``/proc/stat`` gives in whole seconds, which puts the start up to a second early (about
    half a second on the machine this was written on) and inflates every figure counted from it.
    The age measured against the kernel's boot clock has the ticks' 10 ms resolution instead.
    Elsewhere than Linux, psutil's.
    """
    try:
        with open("/proc/self/stat") as stat:
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, AttributeError, ValueError, IndexError):
        return psutil.Process().create_time()
    return time.time() - age


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
