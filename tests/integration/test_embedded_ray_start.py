"""The embedded Ray's start: Ray's processes retry their connections to the object store and the
raylet 20 ms apart instead of a second (the same ten seconds of patience), and its dashboard head,
the process that reports usage statistics, is told not to. Run in a fresh interpreter, as
``gorila train`` starts it."""

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PROBE = """
import json, os
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
import psutil, ray
from gorila.runtime.embedded_ray import start_embedded_ray
from gorila.runtime.ray_cwd import release_empty_directory

start_embedded_ray()
heads = [child for child in psutil.Process().children() if "dashboard/dashboard.py" in " ".join(child.cmdline())]
print(json.dumps({"retry_ms": ray._config.raylet_client_connect_timeout_milliseconds(),
                  "attempts": ray._config.raylet_client_num_connect_attempts(),
                  "usage_stats": [head.environ().get("RAY_USAGE_STATS_ENABLED") for head in heads]}))
ray.shutdown()
release_empty_directory()
"""


def test_the_start_retries_connections_quickly_and_reports_no_usage_statistics():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["retry_ms"] == 20 and seen["retry_ms"] * seen["attempts"] == 10_000  # Ray's ten seconds
    assert seen["usage_stats"] == ["0"], seen  # one dashboard head, opted out


TIMED_OUT = """
import ray
from gorila.errors import SchedulingError
from gorila.runtime.embedded_ray import start_embedded_ray
from gorila.runtime.ray_cwd import release_empty_directory

tries = []


def timed_out(**options):  # Ray's own error when its raylet did not register within its 30 s
    tries.append(options)
    raise Exception("The current node timed out during startup. This could happen because some of the raylet "
                    "failed to startup or the GCS has become overloaded.")


ray.init = timed_out
try:
    start_embedded_ray()
except SchedulingError as err:
    print(len(tries), err)
release_empty_directory()
"""


def test_a_start_that_times_out_twice_is_a_named_error_saying_what_to_do():
    """On a machine busy enough that Ray's raylet misses its 30 s twice, the run ends with a
    SchedulingError naming the load and what to do, not Ray's bare Exception and a traceback."""
    done = subprocess.run([sys.executable, "-c", TIMED_OUT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    tries, _, said = done.stdout.strip().partition(" ")
    assert tries == "2" and said.startswith("Ray did not start on this machine, twice"), said
    assert "load average of" in said and "--runtime local" in said
