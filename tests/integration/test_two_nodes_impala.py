"""IMPALA and PPO on a two-node Ray cluster simulated on loopback: actors, trajectory queues, learners
and the parameter shard spread over both nodes, each algorithm reaching CartPole's target."""

import pytest

from gorila.agents.impala.config import ImpalaConfig
from gorila.agents.ppo.config import PPOConfig
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig

# About 20 s each on two shared cores; a run that stalls fails here instead of hanging the suite.
pytestmark = [pytest.mark.integration, pytest.mark.heavy, pytest.mark.timeout(300)]

MAX_ENV_STEPS = 300_000


def _rl():
    return RLConfig(env="CartPole-v1", total_steps=MAX_ENV_STEPS, eval_every_s=2.0)


class NodesSeen:
    """``on_chunk``: the nodes the run's workers, services and shards were placed on."""

    def __init__(self):
        self.nodes = set()

    def __call__(self, placed):
        for group in (placed.shards, *placed.services.values(), *placed.groups.values()):
            self.nodes.update(group.node_ids)


def _check(summary, seen):
    assert len(seen.nodes) == 2, seen.nodes  # the run spread over both nodes
    assert summary["reached_target"] and summary["best_eval_return"] >= 475, summary["evaluations"][-3:]
    assert summary["env_steps"] < MAX_ENV_STEPS and summary["stop_reason"] != "budget"
    assert summary["pushes_rejected_nonfinite"] == 0


def test_impala_reaches_the_cartpole_target_on_two_nodes(two_nodes, tmp_path, train):
    run, seen = RunConfig(algo="impala", mode="async", runtime="ray", run_dir=tmp_path), NodesSeen()
    _check(train(run, ImpalaConfig(), _rl(), on_chunk=seen), seen)


def test_ppo_reaches_the_cartpole_target_on_two_nodes(two_nodes, tmp_path, train):
    run, seen = RunConfig(algo="ppo", mode="sync", runtime="ray", run_dir=tmp_path), NodesSeen()
    _check(train(run, PPOConfig(), _rl(), on_chunk=seen), seen)
