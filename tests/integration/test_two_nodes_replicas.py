"""Two IMPALA learners that own the parameters together (``--server learner --learners 2``) on a
two-node Ray cluster simulated on loopback: each holds a replica, their gradients meet in gloo
all-reduces over 127.0.0.1, the first publishes, and the run reaches CartPole's target."""

import pytest

from gorila.agents.impala.config import ImpalaConfig
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig
from tests.integration.test_two_nodes_rl import NodesSeen

# About 2 minutes on two shared cores (82,560 env steps, 387 updates, once); a stall fails here.
pytestmark = [pytest.mark.integration, pytest.mark.heavy, pytest.mark.timeout(420)]

MAX_ENV_STEPS = 300_000


def test_two_learners_on_replicas_reach_the_cartpole_target_on_two_nodes(two_nodes, tmp_path, train):
    run = RunConfig(algo="impala", mode="async", runtime="ray", server="learner", run_dir=tmp_path,
                    call_timeout_s=120.0)
    seen = NodesSeen()
    summary = train(run, ImpalaConfig(learners=2, actors=2), RLConfig(env="CartPole-v1", total_steps=MAX_ENV_STEPS,
                                                                      eval_every_s=2.0), on_chunk=seen)
    assert len({n for nodes in seen.members.values() for n in nodes}) == 2, seen.members  # spread over both nodes
    assert "rendezvous" not in seen.members  # the learners' rendezvous is the server's, not a plan service
    assert summary["workers"] == {"actor": 2, "learner": 2}
    assert summary["reached_target"] and summary["best_eval_return"] >= 475, summary["evaluations"][-3:]
    assert summary["env_steps"] < MAX_ENV_STEPS and summary["stop_reason"] == "target"
    assert summary["worker_restarts"] == 0 and summary["pushes_rejected_nonfinite"] == 0
