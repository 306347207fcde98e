"""Issue 44, item 5: an env of 0.2 s a step trains. Its chunks used to be the plan's 100 steps
(20 s of one bundle's steps on the local runtime), so that no row came for 40 s and the run then
failed with WorkerTimeoutError and 0 env steps; chunks are now sized by the time they take."""

import pytest

import gorila
from gorila.driver.chunks import LONGEST_CHUNK_S

SLOW = "gorila/Slow-v0"  # CountingEnv: 5-step episodes, 0.2 s a step


@pytest.mark.heavy  # 10-15 s on 2 cores: PyTorch's import, 2 s of training, the last evaluation, the curve
def test_a_slow_env_trains_shows_progress_and_stops_at_the_time_limit_on_the_local_runtime(tmp_path):
    rows = []
    summary = gorila.train("dqn", env=SLOW, runtime="local", time_limit_s=2.0, eval_episodes=1, run_dir=tmp_path,
                           callback=rows.append)
    assert summary["status"] == "finished" and summary["stop_reason"] == "time_limit"
    assert summary["env_steps"] >= 4
    # Progress shown: a row within the limit's first second, and rows that count more env steps after it.
    assert rows[0]["time_s"] < 1.5 and rows[-1]["env_steps"] > rows[0]["env_steps"] > 0
    # The limit holds to a chunk's length and the last evaluation (one 5-step episode, 1 s), not to minutes.
    assert summary["train_time_s"] < 2.0 + LONGEST_CHUNK_S + 5.0
