"""Exact resume (local runtime): a run stopped after a few rows and resumed to its budget logs the
rows the uninterrupted run logs, evaluations included (``--eval-every-steps``), on every column
that does not measure time."""

import csv
import json

import pytest
import safetensors.numpy

import gorila
from gorila.errors import CheckpointError

DQN = dict(runtime="local", seed=3, total_steps=2_000, stop_at_target=False, actors=2, learning_starts=300,
           batch_size=32, replay_capacity=2_000, n_step=3, eval_episodes=2, eval_every_steps=400,
           checkpoint_every_s=1000.0, checkpoint_replay=True)
A3C = dict(runtime="local", seed=3, total_steps=3_000, stop_at_target=False, workers=2, envs_per_actor=2,
           unroll_length=5, eval_episodes=2, eval_every_steps=600, checkpoint_every_s=1000.0)

#: The columns that measure time: the rest is decided by the run's own work.
TIMED = ("time_s", "env_steps_per_s", "updates_per_s", "eval_train_time_s", "learner_wait_fraction", "actor_act_us",
         "actor_env_us", "actor_pull_us", "actor_send_us")


def _rows(run_dir):
    with open(run_dir / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def _work(rows):
    """Each row without the columns that measure time."""
    return [{k: v for k, v in row.items() if k not in TIMED} for row in rows]


def _evaluations(rows):
    return [row["eval_return"] for row in rows if row["eval_return"]]


def _stop_after(rows: int):
    seen = []

    def callback(row):
        seen.append(row)
        return len(seen) < rows
    return callback


def _interrupted_and_resumed(algo, settings, tmp_path, rows):
    """The rows of a run never stopped, and of the same run stopped after each of ``rows`` rows
    and resumed to its budget."""
    whole = gorila.train(algo, run_dir=tmp_path / "whole", **settings)
    resumed = []
    for n in rows:
        first = gorila.train(algo, run_dir=tmp_path / f"at{n}", callback=_stop_after(n), **settings)
        assert first["stop_reason"] == "callback" and first["env_steps"] < whole["env_steps"]
        assert gorila.train(resume=tmp_path / f"at{n}")["env_steps"] == whole["env_steps"]
        resumed.append(_rows(tmp_path / f"at{n}"))
    return _rows(tmp_path / "whole"), resumed


@pytest.mark.heavy
def test_a_dqn_run_interrupted_and_resumed_logs_the_uninterrupted_runs_rows(tmp_path):
    whole, (resumed,) = _interrupted_and_resumed("dqn", DQN, tmp_path, rows=[5])
    assert len(whole) > 7 and any(r["loss"] for r in whole[:5])  # it learnt before the stop
    assert len(_evaluations(whole)) >= 4
    assert _work(resumed) == _work(whole)


@pytest.mark.heavy
def test_an_a3c_run_interrupted_and_resumed_logs_the_uninterrupted_runs_rows(tmp_path):
    # a checkpoint after every row: taking one changes nothing of the run; stopped before its last
    # row, the resumed run cuts its one chunk to the budget as the whole run did
    whole, resumed = _interrupted_and_resumed("a3c", {**A3C, "checkpoint_every_s": 1e-3}, tmp_path, rows=[3, 9])
    # two one-step chunks first (driver/chunks.py's PROBE_CHUNKS: 20 env steps each), then 200 a row
    assert len(whole) == 10 and [int(r["step"]) for r in whole[-2:]] == [2840, 3000]
    assert len(_evaluations(whole)) >= 4
    assert _work(resumed[0]) == _work(whole) and _work(resumed[1]) == _work(whole)


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


class Crash(Exception):
    pass


def test_an_a3c_run_that_crashed_resumes_from_the_checkpoint_its_failure_saved(tmp_path):
    """A run ended by an error (here its callback's) saves a final checkpoint of its parameters,
    but not of its workers (one may have failed part-way through a step): a resume goes on from
    it to the budget, the rows before the crash being the uninterrupted run's and the steps rising."""
    settings = {**A3C, "checkpoint_every_s": 1e-3, "eval_every_steps": 400}
    gorila.train("a3c", run_dir=tmp_path / "whole", **settings)
    rows = []

    def crash(row):
        rows.append(row)
        if len(rows) == 4:
            raise Crash
    with pytest.raises(Crash):
        gorila.train("a3c", run_dir=tmp_path / "crashed", callback=crash, **settings)
    with open(tmp_path / "crashed" / "summary.json") as f:
        assert json.load(f)["status"] == "failed"
    assert gorila.train(resume=tmp_path / "crashed")["env_steps"] == settings["total_steps"]
    whole, resumed = _rows(tmp_path / "whole"), _rows(tmp_path / "crashed")
    assert _work(resumed[:3]) == _work(whole[:3])
    steps = [int(row["step"]) for row in resumed]
    assert steps == sorted(set(steps)) and steps[-1] == int(whole[-1]["step"])



def test_a_run_directory_whose_snapshot_holds_code_runs_none_of_it(tampered_run):
    run_dir, marker = tampered_run
    with pytest.raises(CheckpointError, match="snapshot"):
        gorila.train(resume=run_dir, total_steps=800)
    assert not marker.exists()


def test_the_command_refuses_a_crafted_snapshot_by_name_with_exit_2_as_security_md_says(tampered_run, capsys):
    from gorila.cli import main

    run_dir, marker = tampered_run
    assert main(["train", "--resume", str(run_dir), "--total-steps", "800"]) == 2
    err = capsys.readouterr().err
    assert "gorila train: error: --resume: the workers' snapshot in the checkpoint resumed from " in err
    assert "nothing it names was run" in err and not marker.exists()


def test_an_impala_run_whose_learner_owns_its_parameters_resumes_exactly(tmp_path):
    """The learner's own shards, optimizer state and publication counts are in the snapshot, and
    the store's parameters in the checkpoint: the resumed run logs the uninterrupted run's rows."""
    settings = dict(runtime="local", seed=3, total_steps=6_000, stop_at_target=False, server="learner",
                    eval_episodes=2, eval_every_steps=600, checkpoint_every_s=1e-3)
    whole, (resumed,) = _interrupted_and_resumed("impala", settings, tmp_path, rows=[4])
    assert len(whole) > 5 and any(r["loss"] for r in whole[:4])
    assert _work(resumed) == _work(whole)


def test_a_recurrent_impala_run_resumes_exactly_with_its_actors_core_states(tmp_path):
    """--core lstm: each actor's core state of every env, mid-episode, is in the snapshot, and the
    resumed run logs the uninterrupted run's rows."""
    settings = dict(runtime="local", seed=3, total_steps=4_000, stop_at_target=False, env="gorila/StatelessCartPole-v1",
                    core="lstm", core_size=16, eval_episodes=2, eval_every_steps=800, checkpoint_every_s=1e-3)
    whole, (resumed,) = _interrupted_and_resumed("impala", settings, tmp_path, rows=[4])
    assert len(whole) > 5 and any(r["loss"] for r in whole[:4])
    assert _work(resumed) == _work(whole)
