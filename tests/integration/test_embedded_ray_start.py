"""The embedded Ray's start loses no time in Ray's once-a-second retries: ``ray.init`` finds the
raylet registered at its first look for it (Ray's own look, should the raylet not be registered
yet, sleeps a second before the next), and Ray's processes retry their connections to the object
store and the raylet 20 ms apart instead of a second. Run in a fresh interpreter: the start is the
one thing measured."""

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PROBE = """
import json, os, time
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
import ray, ray._private.services as services
from gorila.runtime.embedded_ray import start_embedded_ray

looks, get_node = [], services.get_node

def timed(*args):
    began = time.perf_counter()
    try:
        return get_node(*args)
    finally:
        looks.append(time.perf_counter() - began)

services.get_node = timed
start_embedded_ray()
print(json.dumps({"looks": looks, "retry_ms": ray._config.raylet_client_connect_timeout_milliseconds(),
                  "attempts": ray._config.raylet_client_num_connect_attempts()}))
ray.shutdown()
"""


def test_the_start_finds_its_raylet_at_the_first_look_and_retries_connections_quickly():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(seen["looks"]) == 1 and seen["looks"][0] < 0.5, seen  # Ray's retry would take a second
    assert seen["retry_ms"] == 20 and seen["retry_ms"] * seen["attempts"] == 10_000  # Ray's ten seconds
