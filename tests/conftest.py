"""Shared fixtures: one embedded Ray per test module that asks for it, and training through the
builder and the driver as ``gorila train`` does."""

import os

import pytest

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


@pytest.fixture(scope="module")
def ray_local():
    """An embedded Ray on loopback for this module; runtimes made inside join it."""
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _train(run_config, *configs, on_chunk=None):
    from gorila.algos.registry import ALGORITHMS
    from gorila.driver.loop import run

    return run(run_config, ALGORITHMS[run_config.algo].plan_fn()(run_config, *configs), on_chunk)


@pytest.fixture
def train():
    """``train(run_config, *configs, on_chunk=None)``: the algorithm's builder, then the driver."""
    return _train
