"""The embedded Ray's shutdown kills the autoscaler monitor first (it answers SIGTERM only after
sleeping out its interval, which ``ray.shutdown`` would wait for), and nothing else."""

import subprocess
import sys

from gorila.runtime.ray_runtime import AUTOSCALER_MONITOR, kill_autoscaler_monitor

# A child that, like the monitor, does not end on SIGTERM; its command line names what it plays.
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"


def test_the_autoscaler_monitor_is_killed_and_other_children_are_left_alone():
    monitor = subprocess.Popen([sys.executable, "-c", STUBBORN, f"/venv/ray/{AUTOSCALER_MONITOR}"])
    other = subprocess.Popen([sys.executable, "-c", STUBBORN, "/venv/ray/_private/log_monitor.py"])
    try:
        kill_autoscaler_monitor()
        assert monitor.poll() is not None  # gone (and reaped) by the time the call returns, SIGTERM ignored
        assert other.poll() is None
    finally:
        for child in (monitor, other):
            child.kill()
            child.wait(timeout=10)
