"""When the driver dies without shutting its embedded Ray down (SIGKILL, the OOM killer), take
Ray's processes with it.

Ray's raylet starts helper processes of its own (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``)
that notice their raylet is gone only after minutes. An embedded runtime therefore starts a reaper
beside Ray: a small process that keeps a list of the driver's descendants while the driver runs,
and kills those still running as soon as the driver is gone. A driver that shuts down normally
stops its reaper::

    reaper = Reaper.start()      # after ray.init: watches this process
    ...
    reaper.stop()                # after ray.shutdown()

Run as ``python .../gorila/runtime/reaper.py DRIVER_PID``: a script, not ``-m``, so that it imports
no package of gorila (``gorila.runtime`` brings numpy: 7 MiB of memory instead of 21). No Ray here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

import psutil  # type: ignore[import-untyped]  # psutil ships no type hints

#: How often the reaper looks at the driver's processes, in seconds: the longest a process
#: started just before the driver died can go unnoticed, and the delay before the kill.
POLL_S = 0.5


class Reaper:
    """The reaper process of this driver (see the module doc)."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc

    @classmethod
    def start(cls) -> Reaper:
        proc = subprocess.Popen([sys.executable, __file__, str(os.getpid())],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, close_fds=True)
        return cls(proc)

    def stop(self, timeout_s: float = 10.0) -> None:
        """End the reaper (the driver's Ray is down: nothing is left to reap)."""
        self.proc.terminate()
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=timeout_s)


def reap(driver_pid: int) -> None:
    """Watch ``driver_pid``'s descendants until it exits, then kill those still running."""
    me = os.getpid()
    try:
        driver = psutil.Process(driver_pid)
    except psutil.NoSuchProcess:
        return
    seen: dict[int, psutil.Process] = {}
    while True:
        try:
            children = driver.children(recursive=True)
        except psutil.NoSuchProcess:
            break
        seen.update((p.pid, p) for p in children if p.pid != me)
        seen = {pid: p for pid, p in seen.items() if p.is_running()}  # is_running also checks the start time
        _, alive = psutil.wait_procs([driver], timeout=POLL_S)
        if not alive:
            break
    for process in seen.values():
        with contextlib.suppress(psutil.Error):
            if process.is_running():  # not a new process that took a dead one's pid
                process.kill()


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole job: the driver handles it
    reap(int(sys.argv[1]))
