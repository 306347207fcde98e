"""The chaos run: DQN with a global replay trains on CartPole on the Ray runtime while a thread
kills an actor, a learner, a replay shard or the parameter shard every few seconds, and still
reaches its target; the summary counts every restart and every replay row lost.

The short version runs with the other tests (each kind killed once); ``make chaos`` runs the long
one (a random kind every 10 s, beside the same run without chaos), which prints its figures.
"""

import json
import random
import threading
import time

import pytest

from gorila.algos.dqn.config import DQNConfig
from gorila.config import RunConfig
from gorila.driver.rl_config import RLConfig

pytestmark = pytest.mark.integration

KINDS = ("actor", "learner", "replay shard", "parameter shard")


class Chaos:
    """Kills one process every ``interval_s`` on its own thread, once the run has placed them;
    the kinds in the order ``pick()`` gives them. ``kills`` counts them by kind."""

    def __init__(self, interval_s, pick):
        self.interval_s, self.pick = interval_s, pick
        self.kills = dict.fromkeys(KINDS, 0)
        self.killed_actor = None  # (index, pid, version of its parameters) of the last actor killed
        self.restarted_actor_version = None  # the version the restarted one first reported
        self.shard_rolled_back = False  # whether the parameter shard had been killed by then (versions go back)
        self.placed = None
        self._placed = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def on_chunk(self, placed):
        self.placed = placed
        self._placed.set()
        if self.killed_actor is not None and self.restarted_actor_version is None:
            k, pid, _ = self.killed_actor
            report = placed.groups["actor"].reports()[k]
            if report["pid"] != pid and report["version"] >= 0:  # restarted, and it has acted since
                self.restarted_actor_version = report["version"]
                self.shard_rolled_back = self.kills["parameter shard"] > 0

    def _run(self):
        self._placed.wait()
        while not self._stop.wait(self.interval_s):  # a clock, not a synchronisation
            kind = self.pick()
            if kind is None:
                return
            if kind == "actor":
                k = random.randrange(2)
                report = self.placed.groups["actor"].reports()[k]
                self.killed_actor = (k, report["pid"], report["version"])
                self.placed.groups["actor"].kill(k)
            elif kind == "learner":
                self.placed.groups["learner"].kill(0)
            elif kind == "replay shard":
                self.placed.services["replay"].kill(random.randrange(2))
            else:
                self.placed.shards.kill(0)
            self.kills[kind] += 1

    def stop(self):
        self._stop.set()
        self._placed.set()
        self._thread.join(timeout=30)


def dqn_run(tmp_path, train, target, total_steps, chaos=None, stop_at_target=True, time_limit_s=None):
    run = RunConfig(algo="dqn", runtime="ray", run_dir=tmp_path, seed=3, call_timeout_s=120.0,
                    checkpoint_every_s=2.0, time_limit_s=time_limit_s)
    dqn = DQNConfig(replay="global", replay_shards=2, actors=2, learners=1, learning_starts=500)
    rl = RLConfig(env="CartPole-v1", total_steps=total_steps, target_return=target, eval_episodes=5,
                  stop_at_target=stop_at_target)
    try:
        return train(run, dqn, rl, on_chunk=None if chaos is None else chaos.on_chunk)
    finally:
        if chaos is not None:
            chaos.stop()


def restarts(summary):
    return {"workers": summary["worker_restarts"], "replay shards": summary["service_restarts"],
            "parameter shards": summary["shard_restarts"], "items_lost": summary["items_lost"]}


@pytest.mark.timeout(240)
def test_chaos_short_each_kind_killed_once_and_the_run_reaches_its_target(ray_local, tmp_path, train):
    """The chaos run, short: one kill of each kind, 3 s apart, in 25 s of training (a time limit
    rather than a budget of steps, so every kill happens however fast the run goes); it reaches
    the target (a return of 100; random play gets about 20), and its summary counts each
    restart by kind and the replay rows lost. Row 1 (actor killed): the restarted actor acts on
    parameters no older than those it died with, and the replay took every batch at most once. Row 4
    (learner killed): every update is one counted push, none applied twice."""
    order = list(KINDS)
    chaos = Chaos(3.0, lambda: order.pop(0) if order else None)
    summary = dqn_run(tmp_path, train, target=100.0, total_steps=100_000_000, chaos=chaos, stop_at_target=False,
                      time_limit_s=25.0)
    assert chaos.kills == dict.fromkeys(KINDS, 1), chaos.kills
    assert summary["stop_reason"] == "time_limit" and summary["reached_target"], summary["best_eval_return"]
    assert restarts(summary) == {"workers": 2, "replay shards": 1, "parameter shards": 1,
                                 "items_lost": summary["items_lost"]}
    assert summary["items_lost"] > 0  # the replay shard came back empty (DQN's replay is not checkpointed)
    # It pulled before acting (unless the parameter shard, killed since, took the version back).
    assert chaos.shard_rolled_back or chaos.restarted_actor_version >= chaos.killed_actor[2]
    assert summary["updates"] == summary["pushes_counted"] and summary["pushes_rejected_duplicate"] == 0


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_chaos_long_a_random_kill_every_10_s_beside_a_run_without(ray_local, tmp_path, train):
    """The chaos run (``make chaos``): 18 random kills, one every 10 s, in 200 s of training; the
    training time to the target (a return of 400) beside that of the same run without chaos,
    restarts by kind, rows lost. The chaos run goes on past the target so that every kill happens
    and is counted."""
    rng = random.Random(0)
    kills = iter(range(18))
    calm = dqn_run(tmp_path / "calm", train, target=400.0, total_steps=1_000_000)
    chaos = Chaos(10.0, lambda: rng.choice(KINDS) if next(kills, None) is not None else None)
    started = time.perf_counter()
    stormy = dqn_run(tmp_path / "chaos", train, target=400.0, total_steps=1_000_000, chaos=chaos,
                     stop_at_target=False, time_limit_s=200.0)
    figures = {"train_time_to_target_s_without_chaos": calm["train_time_to_target_s"],
               "train_time_to_target_s_with_chaos": stormy["train_time_to_target_s"],
               "chaos_run_s": time.perf_counter() - started, "kills": chaos.kills, "counted": restarts(stormy)}
    print(json.dumps(figures, indent=2))
    assert calm["reached_target"] and stormy["reached_target"], figures
    counted = stormy["worker_restarts"] + stormy["service_restarts"] + stormy["shard_restarts"]
    assert counted == sum(chaos.kills.values()), figures
