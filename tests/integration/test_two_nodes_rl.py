"""DQN with a global replay, Ape-X and A3C on a two-node Ray cluster simulated on loopback: their
actors (workers) and replay shards placed on both nodes, each run reaching CartPole's target with
its greedy (DQN, Ape-X: ε = 0.05) evaluation. IMPALA and PPO: test_two_nodes_impala.py."""

import pytest

from gorila.agents.a3c.config import A3CConfig
from gorila.agents.apex.config import ApexConfig
from gorila.agents.dqn.config import DQNConfig
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig

# A run that stalls fails here instead of hanging the suite.
pytestmark = [pytest.mark.integration, pytest.mark.heavy, pytest.mark.timeout(420)]

MAX_ENV_STEPS = 300_000


def _rl(target=None):
    return RLConfig(env="CartPole-v1", total_steps=MAX_ENV_STEPS, target_return=target, eval_every_s=2.0,
                    eval_episodes=5)


class NodesSeen:
    """``on_chunk``: the nodes each placed group (workers, services, shards) runs on, by name, and
    the node of every member in order."""

    def __init__(self):
        self.members = {}

    def __call__(self, placed):
        self.members["shards"] = list(placed.shards.node_ids)
        for name, group in (*placed.services.items(), *placed.groups.items()):
            self.members[name] = list(group.node_ids)

    def nodes(self, name):
        return set(self.members[name])


def _reached(summary, target):
    assert summary["reached_target"] and summary["best_eval_return"] >= target, summary["evaluations"][-3:]
    assert summary["env_steps"] < MAX_ENV_STEPS and summary["stop_reason"] == "target"
    assert summary["pushes_rejected_nonfinite"] == 0 and summary["worker_restarts"] == 0


def _replay_by_node(seen):
    """Replay shard s on node s, and actor k on the node of the shard it writes to (k mod 2)."""
    shards, actors = seen.members["replay"], seen.members["actor"]
    assert len(set(shards)) == 2, shards
    assert len(set(actors)) == 2 and all(node == shards[k % 2] for k, node in enumerate(actors)), (actors, shards)


# From 4,000 to 110,000 env steps (30 to 230 s of training, over 600 s on a slow day) on two shared cores.
@pytest.mark.timeout(900)
def test_dqn_with_a_global_replay_reaches_the_cartpole_target_on_two_nodes(two_nodes, tmp_path, train):
    run, seen = RunConfig(algo="dqn", runtime="ray", run_dir=tmp_path, call_timeout_s=120.0), NodesSeen()
    dqn = DQNConfig(replay="global", replay_shards=2, replay_placement="node", actors=2, learners=1,
                    learning_starts=500)
    summary = train(run, dqn, _rl(), on_chunk=seen)
    _replay_by_node(seen)
    _reached(summary, 475)


def test_apex_reaches_the_cartpole_target_on_two_nodes(two_nodes, tmp_path, train):
    run, seen = RunConfig(algo="apex", runtime="ray", run_dir=tmp_path, call_timeout_s=120.0), NodesSeen()
    apex = ApexConfig(actors=2, envs_per_actor=4, replay_shards=2, replay_placement="node", learning_starts=400,
                      batch_size=32, replay_capacity=20_000, samples_per_insert=4.0)
    summary = train(run, apex, _rl(), on_chunk=seen)
    _replay_by_node(seen)
    _reached(summary, 475)


def test_a3c_reaches_the_cartpole_target_on_two_nodes(two_nodes, tmp_path, train):
    run, seen = RunConfig(algo="a3c", mode="sync", runtime="ray", run_dir=tmp_path), NodesSeen()
    summary = train(run, A3CConfig(), _rl(), on_chunk=seen)
    assert len(seen.nodes("worker")) == 2, seen.members  # one worker on each node
    _reached(summary, 475)
