"""Central inference on real Ray processes: a killed rollout worker is restarted and the server
forgets its connection; a killed inference server is restarted and serves the workers again."""

import pytest

from gorila.agents.dqn.config import DQNConfig
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.mark.heavy
def test_killed_rollout_worker_and_killed_server_are_restarted_and_serving_resumes(ray_local, tmp_path, train):
    run = RunConfig(algo="dqn", mode="async", runtime="ray", run_dir=tmp_path, seed=0, checkpoint_every_s=600)
    cfg = DQNConfig(actors=2, envs_per_actor=4, replay="global", learning_starts=200, hidden=(16,))
    rl = RLConfig(env="CartPole-v1", total_steps=20_000, stop_at_target=False, eval_every_s=600, eval_episodes=1,
                  inference="central")
    seen = {}

    def kill(placed):
        actors, inference = placed.groups["actor"], placed.services["inference"]
        actor, server = actors.reports()[0], inference.call("stats")[0]
        if "actor" not in seen and actor["env_steps"] > 500:
            seen["actor"] = actor
            actors.kill(0)
        elif "actor" in seen and "actor_after" not in seen and actor["pid"] != seen["actor"]["pid"]:
            # the server saw the dead worker's connection close; the new worker is being served
            seen["actor_after"], seen["server_saw"] = actor, server
        elif "actor_after" in seen and "server" not in seen and actor["env_steps"] > seen["actor_after"]["env_steps"]:
            seen["server"] = server
            inference.kill(0)
        elif "server" in seen and "server_after" not in seen and server["pid"] != seen["server"]["pid"]:
            if server["batches"] > 0:
                seen["server_after"], seen["actor_at_server_restart"] = server, actor
        elif "server_after" in seen and "actor_end" not in seen:
            seen["actor_end"] = actor

    summary = train(run, cfg, rl, on_chunk=kill)
    assert {"actor_after", "server_after", "actor_end"} <= seen.keys(), f"the run ended before every stage: {seen}"
    assert seen["actor_after"]["restarted"] and summary["worker_restarts"] >= 1
    assert seen["server_saw"]["clients_lost"] >= 1
    # the restarted server serves both workers, and they keep stepping on its actions
    assert seen["server_after"]["clients"] == 2
    assert seen["actor_end"]["env_steps"] > seen["actor_at_server_restart"]["env_steps"]
    assert summary["service_restarts"] >= 1 and summary["env_steps"] >= 20_000
