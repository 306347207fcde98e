"""On Ray, a plan given as the function that builds it is built on a thread while Ray starts; a
plan that cannot be built is the run's error, and leaves no Ray behind."""

import subprocess
import sys
import threading

import pytest

from gorila.config import RunConfig
from gorila.driver.loop import run
from gorila.errors import ConfigError

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def test_a_plan_that_cannot_be_built_beside_ray_is_raised_and_ray_shut_down(tmp_path):
    import ray

    assert not ray.is_initialized()  # this run starts its own embedded Ray
    built_on = []

    def build():
        built_on.append(threading.current_thread().name)
        raise ConfigError("env", "no such env: Nowhere-v0")

    with pytest.raises(ConfigError, match="no such env"):
        run(RunConfig(algo="dqn", runtime="ray", run_dir=tmp_path / "run"), build)
    assert len(built_on) == 1 and built_on[0].startswith("plan")  # not this (the main) thread
    assert not ray.is_initialized()


STOPPED_WHILE_THE_PLAN_BUILDS = """
import os, signal, sys, threading
from gorila.config import RunConfig
from gorila.driver.loop import run
from gorila.driver.stop import Interrupted

def build():  # the job is stopped while its plan builds, and the build never ends
    os.kill(os.getpid(), signal.SIGTERM)
    threading.Event().wait()

try:
    run(RunConfig(algo="a3c", runtime="ray", run_dir=sys.argv[1]), build)
except Interrupted as stop:
    sys.exit(stop.exit_code)
"""


def test_a_start_stopped_while_the_plan_builds_ends_without_waiting_for_the_plan(tmp_path):
    """The signal's exception lands in the main thread wherever it is (it may leave a lock taken
    there that the plan's imports need): the command ends with 143 whether or not the plan ever
    finishes building."""
    done = subprocess.run([sys.executable, "-c", STOPPED_WHILE_THE_PLAN_BUILDS, str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 143, done.stderr
