"""What every Ray process of a run loads before it hosts anything: the modules that host workers,
services and shards, and nothing of the driver's (its logger, the terminal's progress, the local
runtime) or torch. Each such import costs every process its CPU at the start, when the run's
processes share the cores, and its memory for the whole run."""

import subprocess
import sys

DRIVER_ONLY = ("torch", "rich", "matplotlib", "gorila.runtime.local", "gorila.metrics.run_logger",
               "gorila.metrics.plots")


def test_the_ray_hosts_load_none_of_the_drivers_modules_nor_torch():
    probe = ("import sys\n"
             "import gorila.runtime.ray_processes, gorila.runtime.ray_shards, gorila.runtime.ray_caches\n"
             f"print(sorted(m for m in {DRIVER_ONLY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
