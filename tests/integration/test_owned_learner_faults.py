"""A learner that owns its parameters (``--server learner``) under faults: killed mid-run, it is
restarted from what it last published, its actors act on the published version while it is down,
and the run reaches its target."""

import pytest

from gorila.agents.impala.config import ImpalaConfig
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.mark.heavy
def test_a_killed_owning_learner_restarts_from_its_publication_while_its_actors_act(ray_local, tmp_path, train):
    run = RunConfig(algo="impala", runtime="ray", server="learner", run_dir=tmp_path, seed=0, checkpoint_every_s=600)
    # Not stopped at the target: an early evaluation that reaches it must not end the run before the
    # restarted learner has reported (the target is still judged, and must be reached).
    rl = RLConfig(env="CartPole-v1", total_steps=150_000, target_return=250.0, eval_episodes=5, stop_at_target=False)
    seen = {}

    def kill_once(placed):
        learner = placed.groups["learner"]
        actors = sum(r["env_steps"] for r in placed.groups["actor"].reports())
        report = learner.reports()[0]
        if not seen and report["version"] > 8:
            seen.update(version=report["version"], pid=report["pid"], actors=actors)
            learner.kill(0)
        elif seen and "after" not in seen and report["pid"] != seen["pid"]:
            seen.update(after=report, actors_after=actors)

    summary = train(run, ImpalaConfig(), rl, on_chunk=kill_once)
    assert seen and "after" in seen, "the run ended before the restarted learner reported"
    assert summary["worker_restarts"] >= 1
    # It came back from the store (its last publication), not from the initial parameters.
    assert seen["after"]["version"] >= seen["version"] - 5, (seen["version"], seen["after"]["version"])
    assert seen["actors_after"] > seen["actors"]  # the actors went on acting while it was down
    assert summary["time_to_target_s"] is not None, summary["best_eval_return"]
