"""What every Ray process of a run loads before it hosts anything: the modules that host workers,
services and shards, and nothing of the driver's (its logger, the terminal's progress, the local
runtime) or torch. Each such import costs every process its CPU at the start, when the run's
processes share the cores, and its memory for the whole run."""

import pickle
import subprocess
import sys

import pytest

from gorila.agents.kit import QUEUES
from gorila.agents.registry import ALGORITHMS
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig

DRIVER_ONLY = ("torch", "rich", "matplotlib", "gorila.runtime.local", "gorila.metrics.run_logger",
               "gorila.metrics.plots")


def test_the_ray_hosts_load_none_of_the_drivers_modules_nor_torch():
    probe = ("import sys\n"
             "import gorila.runtime.ray_processes, gorila.runtime.ray_shards, gorila.runtime.ray_caches\n"
             f"print(sorted(m for m in {DRIVER_ONLY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


UNPICKLES = """
import pickle, sys
factory = pickle.load(sys.stdin.buffer)
print('torch' in sys.modules, factory.keywords['numpy_policy'] is not None)
"""


@pytest.mark.parametrize("algo", ["impala", "ppo"])
@pytest.mark.parametrize("env", ["MinAtar/Breakout-v1", "CartPole-v1", "Pendulum-v1"])
def test_what_ray_sends_an_impala_or_ppo_actor_unpickles_without_torch(algo, env):
    """Ray unpickles a worker's factory in the worker's process: a function that builds a torch
    network among its arguments would import torch there, though the actor acts in numpy."""
    config = ALGORITHMS[algo].config_classes()[0]()
    plan = ALGORITHMS[algo].plan_fn()(RunConfig(algo=algo, runtime="ray"), config, RLConfig(env=env))
    (actors,) = [g for g in plan.groups({QUEUES: ["an endpoint"]}) if g.name == "actor"]
    done = subprocess.run([sys.executable, "-c", UNPICKLES], input=pickle.dumps(actors.factory),
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().split() == ["False", "True"]  # a numpy twin, and no torch
