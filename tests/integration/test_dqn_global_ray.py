"""Gorila DQN with a global replay on real Ray: 2 actors, 1 learner, 2 replay shards, CartPole; a
replay shard killed and held down while the learner goes on with the other."""

import dataclasses
import json
import os
import queue
import sys
import threading
import time
from pathlib import Path

import pytest

from gorila.agents.dqn.config import DQNConfig
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


@pytest.mark.heavy
def test_actors_learner_and_replay_shards_run_as_ray_workers(ray_local, tmp_path, train):
    dqn = DQNConfig(replay="global", replay_shards=2, actors=2, learners=1, learning_starts=500)
    summary = train(RunConfig(algo="dqn", runtime="ray", run_dir=tmp_path, call_timeout_s=60.0), dqn,
                    RLConfig(env="CartPole-v1", total_steps=3000, eval_episodes=2, target_return=1e9))
    assert summary["stop_reason"] == "budget" and summary["env_steps"] >= 3000
    assert summary["workers"] == {"actor": 2, "learner": 1}
    assert summary["updates"] == summary["pushes_counted"] > 0 and summary["pushes_rejected"] == 0
    assert summary["worker_restarts"] == 0
    assert json.loads((tmp_path / "config.json").read_text())["dqn"]["replay"] == "global"


class GatedRestart:
    """Builds a replay shard; built again in a restarted process, it first waits until the test
    opens the gate (a FIFO: opening it to read blocks until a writer opens it), so the shard stays
    down for as long as the test needs."""

    def __init__(self, build, gate_dir: Path):
        self.build, self.gate_dir = build, gate_dir

    def __call__(self, shard_id: int):
        built = self.gate_dir / f"built-{shard_id}"
        if built.exists():
            with open(self.gate_dir / "gate") as gate:
                gate.read()
        built.touch()
        return self.build(shard_id)


@pytest.mark.heavy
def test_row2_learners_keep_drawing_from_the_surviving_shard_while_a_killed_one_is_down(ray_local, tmp_path):
    """Row 2 of the fault matrix: while a killed replay shard is down, the learner goes on
    sampling from the other shard (its version keeps moving); the shard comes back empty and the
    rows it held are counted as lost. Before, the learner waited on the dead shard's reply."""
    from gorila.agents.registry import ALGORITHMS
    from gorila.driver.loop import run

    ray_local.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the gated factory
    gate_dir = tmp_path / "gate"
    gate_dir.mkdir()
    os.mkfifo(gate_dir / "gate")
    config = RunConfig(algo="dqn", runtime="ray", run_dir=tmp_path / "run", call_timeout_s=90.0)
    dqn = DQNConfig(replay="global", replay_shards=2, actors=2, learners=1, learning_starts=500)
    plan = ALGORITHMS["dqn"].plan_fn()(config, dqn, RLConfig(env="CartPole-v1", total_steps=4000, eval_episodes=2,
                                                             target_return=1e9))
    replay = next(s for s in plan.services if s.name == "replay")
    plan = dataclasses.replace(plan, services=tuple(
        dataclasses.replace(s, factory=GatedRestart(s.factory, gate_dir)) if s is replay else s
        for s in plan.services))
    killed, seen = queue.Queue(), {}

    def watch_while_down():
        placed, size = killed.get(timeout=200)
        seen["size"] = size
        start = sum(placed.shards.pull()[1])
        deadline = time.monotonic() + 60
        versions = [start]
        while versions[-1] < start + 100 and time.monotonic() < deadline:
            versions.append(sum(placed.shards.pull()[1]))
        seen["moved"] = versions[-1] - start
        with open(gate_dir / "gate", "w"):  # let the shard come back
            pass

    watcher = threading.Thread(target=watch_while_down, daemon=True)
    watcher.start()

    def kill_once(placed):
        if not seen and killed.empty() and sum(placed.shards.pull()[1]) > 50:
            size = placed.services["replay"].call("stats")[0]["size"]
            placed.services["replay"].kill(0)
            killed.put((placed, size))

    summary = run(config, plan, kill_once)
    watcher.join(timeout=10)
    assert seen.get("moved", 0) >= 100, f"the learner's version moved {seen.get('moved')} while shard 0 was down"
    assert summary["stop_reason"] == "budget" and summary["service_restarts"] == 1
    # It came back empty: what it held at the driver's last look before the kill is counted lost.
    assert 0 < summary["items_lost"] <= seen["size"]
