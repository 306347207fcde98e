"""Exact resume (local runtime): a run stopped after a few rows and resumed to its budget logs the
rows the uninterrupted run logs, on every column that does not measure time, and plays the same
evaluations on the same parameters."""

import csv

import pytest
import safetensors.numpy

import gorila
from gorila.errors import CheckpointError

DQN = dict(runtime="local", seed=3, total_steps=2_000, stop_at_target=False, actors=2, learning_starts=300,
           batch_size=32, replay_capacity=2_000, n_step=3, eval_episodes=2, eval_every_steps=400,
           checkpoint_every_s=1000.0, checkpoint_replay=True)
A3C = dict(runtime="local", seed=3, total_steps=3_000, stop_at_target=False, workers=2, envs_per_worker=2,
           rollout_steps=5, eval_episodes=2, eval_every_steps=600, checkpoint_every_s=1000.0)

#: What a row holds that the run's own work decides (not the clock): progress, the server's
#: counters, the training returns and losses, and the plan's own columns.
TIMED = ("time_s", "env_steps_per_s", "updates_per_s")
#: Where an evaluation lands among the rows follows the clock (it is played in slices of the wall
#: time between chunks); what it played, and on which parameters, does not.
EVAL = ("eval_return", "eval_version", "eval_min", "eval_max", "eval_env_steps", "eval_env_failures")


def _rows(run_dir):
    with open(run_dir / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def _training(rows):
    """Each row's columns that the work decides, evaluations left out; the rows that only carry an
    evaluation's result (a final row at the step of the one before) left out."""
    out = []
    for row in rows:
        kept = {k: v for k, v in row.items() if k not in TIMED and k not in EVAL and k != "eval_train_time_s"}
        if out and kept == out[-1]:
            continue
        out.append(kept)
    return out


def _evaluations(rows):
    return [{k: row[k] for k in EVAL} for row in rows if row["eval_return"]]


def _stop_after(rows: int):
    seen = []

    def callback(row):
        seen.append(row)
        return len(seen) < rows
    return callback


def _interrupted_and_resumed(algo, settings, tmp_path, rows):
    whole = gorila.train(algo, run_dir=tmp_path / "whole", **settings)
    first = gorila.train(algo, run_dir=tmp_path / "resumed", callback=_stop_after(rows), **settings)
    assert first["stop_reason"] == "callback" and first["env_steps"] < whole["env_steps"]
    resumed = gorila.train(resume=tmp_path / "resumed")
    assert resumed["env_steps"] == whole["env_steps"]
    return _rows(tmp_path / "whole"), _rows(tmp_path / "resumed")


def test_a_dqn_run_interrupted_and_resumed_logs_the_uninterrupted_runs_rows(tmp_path):
    whole, resumed = _interrupted_and_resumed("dqn", DQN, tmp_path, rows=5)
    assert len(_training(whole)) > 7 and any(r["loss"] for r in whole[:5])  # it learnt before the stop
    assert _training(resumed) == _training(whole)
    assert len(_evaluations(whole)) >= 4
    assert _evaluations(resumed) == _evaluations(whole)


def test_an_a3c_run_interrupted_and_resumed_logs_the_uninterrupted_runs_rows(tmp_path):
    # a checkpoint after every row: taking one changes nothing of the run
    whole, resumed = _interrupted_and_resumed("a3c", {**A3C, "checkpoint_every_s": 1e-3}, tmp_path, rows=3)
    assert len(_training(whole)) > 5
    assert _training(resumed) == _training(whole)
    assert _evaluations(resumed) == _evaluations(whole)


def _last_checkpoint_arrays(run_dir):
    newest = sorted((run_dir / "checkpoints").glob("ckpt-*[0-9].safetensors"))[-1]
    return safetensors.numpy.load_file(newest)


def test_without_checkpoint_replay_a_dqn_checkpoint_holds_no_workers(tmp_path):
    gorila.train("dqn", run_dir=tmp_path / "run", **{**DQN, "total_steps": 400, "checkpoint_replay": False})
    assert "workers.snapshot" not in _last_checkpoint_arrays(tmp_path / "run")
    assert "shard0.params" in _last_checkpoint_arrays(tmp_path / "run")


def test_an_exact_resume_with_another_number_of_workers_is_refused(tmp_path):
    gorila.train("a3c", run_dir=tmp_path / "run", **{**A3C, "total_steps": 400})
    assert "workers.snapshot" in _last_checkpoint_arrays(tmp_path / "run")
    with pytest.raises(CheckpointError, match="holds 2 in the worker group 'worker', this run asks for 3"):
        gorila.train(resume=tmp_path / "run", workers=3, total_steps=800)


def test_dqn_global_replay_shards_save_themselves_with_checkpoint_replay(tmp_path):
    """As Ape-X's do: what a restarted (Ray) or resumed replay shard comes back from."""
    settings = {**DQN, "replay": "global", "total_steps": 600, "learning_starts": 200}
    gorila.train("dqn", run_dir=tmp_path / "run", **settings)
    saved = safetensors.numpy.load_file(sorted((tmp_path / "run" / "checkpoints" / "replay-shard0")
                                               .glob("ckpt-*.safetensors"))[-1])
    assert sum(len(v) for k, v in saved.items() if "obs" in k) > 0
    gorila.train("dqn", run_dir=tmp_path / "without", **{**settings, "checkpoint_replay": False})
    assert not (tmp_path / "without" / "checkpoints" / "replay-shard0").exists()
