"""The embedded Ray's helpers that a run never uses are killed once it is up (the autoscaler
monitor would also hold up ``ray.shutdown``, answering SIGTERM only after waiting out its
interval), and nothing else."""

import subprocess
import sys

from gorila.runtime.ray_runtime import AUTOSCALER_MONITOR, LOG_MONITOR, kill_children

# A child that, like the monitor, does not end on SIGTERM; its command line names what it plays.
STUBBORN = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.pause()"


def test_the_children_named_are_killed_and_the_others_left_alone():
    monitor = subprocess.Popen([sys.executable, "-c", STUBBORN, f"/venv/ray/{AUTOSCALER_MONITOR}"])
    log_monitor = subprocess.Popen([sys.executable, "-u", "-c", STUBBORN, f"/venv/ray/{LOG_MONITOR}", "--x"])
    other = subprocess.Popen([sys.executable, "-c", STUBBORN, "/venv/ray/dashboard/dashboard.py"])
    try:
        kill_children(AUTOSCALER_MONITOR, LOG_MONITOR)
        # gone (and reaped) by the time the call returns, SIGTERM ignored
        assert monitor.poll() is not None and log_monitor.poll() is not None
        assert other.poll() is None
    finally:
        for child in (monitor, log_monitor, other):
            child.kill()
            child.wait(timeout=10)

