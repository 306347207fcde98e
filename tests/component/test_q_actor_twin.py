"""Which network the Q-actors of a plan play: Ape-X's and global-replay DQN's actors their network's
numpy twin (dueling or not), in processes that never import torch; Gorila DQN's bundles the torch
network their learner shares a process with."""

import pickle
import subprocess
import sys

from gorila.agents.apex.builder import make_plan as apex_plan
from gorila.agents.apex.config import ApexConfig
from gorila.agents.dqn.builder import make_plan as dqn_plan
from gorila.agents.dqn.config import DQNConfig
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig
from gorila.nets.numpy_mlp import NumpyDueling, NumpyMLP
from gorila.nets.q import TorchQNetwork
from gorila.runtime import LocalRuntime

ENV = "gorila/Counting-v0"


def started(plan, group: str):
    """``(runtime, shards, the group's WorkerSpec)`` of the plan's services started on the local runtime."""
    runtime = LocalRuntime()
    shards = runtime.start_shards(plan.spec, plan.initial_params())
    services = {s.name: runtime.start_services(s.factory, s.count, name=s.name) for s in plan.services}
    (spec,) = [w for w in plan.groups({name: g.endpoints() for name, g in services.items()}) if w.name == group]
    return runtime, shards, spec


def networks(plan, group: str) -> list:
    """The network each worker of ``group`` acts with, the plan started on the local runtime."""
    runtime, shards, spec = started(plan, group)
    workers = runtime.start_workers(spec.factory, spec.count, shards.server, name=group)
    workers.run_steps(2)  # they act on the server's parameters
    return [worker.actor.network for worker in workers.workers]


def test_apex_actors_play_the_dueling_networks_twin():
    cfg = ApexConfig(actors=2, envs_per_actor=2, replay_capacity=1000, hidden=(8,), dueling=True)
    played = networks(apex_plan(RunConfig(algo="apex", runtime="local"), cfg, RLConfig(env=ENV)), "actor")
    assert len(played) == 2 and all(type(net) is NumpyDueling for net in played)
    assert played[0] is not played[1]  # each its own copy of the plan's twin


def test_global_replay_dqn_actors_play_the_twin_and_bundles_the_torch_network():
    cfg = DQNConfig(replay="global", replay_shards=1, actors=1, hidden=(8,), replay_capacity=1000)
    (played,) = networks(dqn_plan(RunConfig(algo="dqn", runtime="local"), cfg, RLConfig(env=ENV)), "actor")
    assert type(played) is NumpyMLP
    cfg = DQNConfig(replay="local", actors=1, hidden=(8,), replay_capacity=1000)
    (played,) = networks(dqn_plan(RunConfig(algo="dqn", runtime="local"), cfg, RLConfig(env=ENV)), "bundle")
    assert type(played) is TorchQNetwork


ACTS_WITHOUT_TORCH = """
import pickle, sys
spec, params = pickle.load(sys.stdin.buffer)
actor = spec.build(index=1)
actor.load(params, version=0)
rows = [actor.act() for _ in range(3)]
print(sum(len(r) for r in rows if r is not None), actor.priorities(rows[-1]).shape, 'torch' in sys.modules)
"""


def test_an_apex_actors_spec_unpickles_builds_and_acts_in_a_process_without_torch():
    cfg = ApexConfig(actors=2, envs_per_actor=2, replay_capacity=1000, hidden=(8,), dueling=True, n_step=1)
    plan = apex_plan(RunConfig(algo="apex", runtime="local"), cfg, RLConfig(env=ENV))
    _, _, group = started(plan, "actor")
    spec = group.factory.keywords["actor"]  # what each actor's process is sent
    shipped = pickle.dumps((spec, plan.initial_params()))
    done = subprocess.run([sys.executable, "-c", ACTS_WITHOUT_TORCH], input=shipped, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().split() == ["6", "(2,)", "False"]  # 3 one-step rows of 2 envs; no torch
