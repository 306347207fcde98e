"""Row 13 of the fault matrix: memory. A 10-minute DQN run's resident memory, over all its
processes, stays flat once replay is full. Marked slow: ``pytest -m slow -s tests/integration/test_soak.py``
(``GORILA_SOAK_S`` sets another length). It prints the RSS of each kind of process as replay fills
and at the end."""

import collections
import json
import os
import threading

import psutil
import pytest

from gorila.agents.dqn.config import DQNConfig
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SOAK_S = float(os.environ.get("GORILA_SOAK_S", "600"))
CAPACITY = 20_000  # rows per replay shard: full after a fraction of the run


def rss_by_kind() -> dict[str, float]:
    """MiB resident in this process and each of its descendants, summed by kind (Ray's title)."""
    me = psutil.Process()
    out: collections.Counter = collections.Counter()
    for process in [me, *me.children(recursive=True)]:
        try:
            title = (process.cmdline() or [""])[0] or process.name()  # Ray's own processes: their title
            # "ray::WorkerProcess.run_steps" -> "ray::WorkerProcess";
            # ".../ray/core/src/ray/gcs/gcs_server" -> "gcs_server"
            kind = "driver" if process.pid == me.pid else title.split()[0].rsplit("/", 1)[-1].split(".")[0]
            out[kind] += process.memory_info().rss / 2**20
        except (psutil.Error, IndexError):
            continue
    return dict(out)


@pytest.mark.timeout(SOAK_S + 300)
def test_row13_total_rss_stays_flat_after_replay_fills(tmp_path, train):
    """Row 13 (memory), on the embedded Ray that ``gorila train`` starts: once both replay shards
    are full, the total RSS over every process of the run grows by less than 5 % (plus 50 MiB of
    slack for allocator noise) until the end. (With Ray recording task events, its own processes
    alone grew by 275 MiB, 11 % of the total, in 10 minutes.)"""
    full, samples = threading.Event(), []

    def watch(placed):
        sizes = [s["size"] for s in placed.services["replay"].call("stats")]
        if min(sizes) >= CAPACITY and not full.is_set():
            full.set()
            samples.append(("replay full", rss_by_kind()))

    run = RunConfig(algo="dqn", runtime="ray", run_dir=tmp_path, time_limit_s=SOAK_S, checkpoint_every_s=60.0)
    dqn = DQNConfig(replay="global", replay_shards=2, replay_capacity=CAPACITY, actors=2, learners=1)
    rl = RLConfig(env="CartPole-v1", total_steps=100_000_000, stop_at_target=False, eval_episodes=2)
    final = {}

    def last_row(placed):
        watch(placed)
        final["rss"] = rss_by_kind()  # overwritten every row: the last one is taken before shutdown

    summary = train(run, dqn, rl, on_chunk=last_row)
    assert full.is_set(), f"replay never filled in {SOAK_S:.0f} s ({summary['env_steps']} env steps)"
    at_full, at_end = samples[0][1], final["rss"]
    print(json.dumps({"soak_s": SOAK_S, "env_steps": summary["env_steps"], "rss_mib_when_replay_full": at_full,
                      "rss_mib_at_end": at_end}, indent=2))
    before, after = sum(at_full.values()), sum(at_end.values())
    assert after <= 1.05 * before + 50, (before, after)
