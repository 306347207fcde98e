"""Issue 44, item 5 on Ray: an env of 0.2 s a step trains there too (it used to fail after 105 s
with WorkerTimeoutError and 0 env steps): the first chunk of each group is one step, and the
chunks after it are sized by the time they take."""

import pytest

import gorila
from gorila.driver.chunks import LONGEST_CHUNK_S

pytestmark = [pytest.mark.integration, pytest.mark.heavy]


def test_a_slow_env_trains_shows_progress_and_stops_at_the_time_limit_on_ray(ray_local, tmp_path):
    rows = []
    summary = gorila.train("dqn", env="gorila/Slow-v0", time_limit_s=3.0, eval_episodes=1, run_dir=tmp_path,
                           callback=rows.append)
    assert summary["status"] == "finished" and summary["stop_reason"] == "time_limit"
    assert summary["env_steps"] >= 6
    assert rows[0]["time_s"] < 1.5 and len(rows) >= 3 and rows[-1]["env_steps"] > rows[0]["env_steps"] > 0
    assert summary["train_time_s"] < 3.0 + LONGEST_CHUNK_S + 5.0


def test_a_chunk_sized_on_fast_steps_ends_by_time_when_the_steps_become_slow_on_ray(ray_local, tmp_path):
    # gorila/Slowing-v0's steps take 0.1 s after each process's first 2,000: the chunks grown on the
    # fast ones would last minutes (an Ape-X learner's warm-up, then its first updates, did that).
    summary = gorila.train("a3c", env="gorila/Slowing-v0", time_limit_s=6.0, eval_episodes=1, run_dir=tmp_path)
    assert summary["status"] == "finished" and summary["stop_reason"] == "time_limit"
    assert summary["train_time_s"] < 6.0 + LONGEST_CHUNK_S + 5.0
