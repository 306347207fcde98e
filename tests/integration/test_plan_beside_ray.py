"""On Ray, a plan given as the function that builds it is built on a thread while Ray starts; a
plan that cannot be built is the run's error, and leaves no Ray behind."""

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
