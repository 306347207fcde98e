"""Resume that means what it says (local runtime): a time limit counts the resumed run's own
training, the step budget stays the run's total, a run with nothing left to do says why in one
line, metrics.csv is cut back to the restored checkpoint, the time to target counts from the first
start, and a checkpoint of another optimizer is refused naming the flag."""

import csv
import json
import re
import shutil

import pytest

import gorila
from gorila.cli import main
from gorila.errors import ConfigError

A3C = dict(runtime="local", total_steps=4_000, stop_at_target=False, eval_episodes=2, eval_every_s=0.5,
           checkpoint_every_s=1000.0)


def _rows(run_dir):
    with open(run_dir / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def a3c_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("resume") / "run"
    return run_dir, gorila.train("a3c", run_dir=run_dir, **A3C)


def _copy(run, tmp_path):
    return shutil.copytree(run[0], tmp_path / "run"), run[1]


def test_a_run_logs_its_last_row_once(a3c_run):
    steps = [int(r["step"]) for r in _rows(a3c_run[0])]
    assert steps == sorted(set(steps)), steps  # strictly increasing: no row repeated


def test_metrics_are_cut_back_to_the_restored_checkpoint(a3c_run, tmp_path):
    run_dir, first = _copy(a3c_run, tmp_path)
    # rows a killed run logged after its last checkpoint: the resumed run does that work again
    rows = _rows(run_dir)
    with open(run_dir / "metrics.csv", "a", newline="") as f:
        for extra in (1, 2):
            csv.writer(f).writerow([first["env_steps"] + 500 * extra, *list(rows[-1].values())[1:]])
    summary = gorila.train(resume=run_dir, total_steps=8_000)
    steps = [int(r["step"]) for r in _rows(run_dir)]
    assert steps == sorted(set(steps)), steps  # never backwards, never repeated
    assert first["env_steps"] + 500 not in steps and steps[-1] == summary["env_steps"] >= 8_000
    assert [int(r["step"]) for r in _rows(run_dir)[:len(rows)]] == [int(r["step"]) for r in rows]


def test_a_time_limit_on_resume_is_more_training_and_the_budget_stays_the_total(a3c_run, tmp_path):
    run_dir, first = _copy(a3c_run, tmp_path)
    summary = gorila.train(resume=run_dir, total_steps=10_000_000, time_limit_s=2.0)
    assert summary["stop_reason"] == "time_limit"
    assert summary["train_time_s"] - first["train_time_s"] >= 2.0
    summary = gorila.train(resume=run_dir, time_limit_s=1.0)  # the total given before is kept
    assert summary["stop_reason"] == "time_limit"
    assert json.loads((run_dir / "config.json").read_text())["a3c"]["total_steps"] == 10_000_000


def test_a_resumed_run_with_its_budget_used_says_so_and_trains_nothing(a3c_run, tmp_path, capfd):
    run_dir, first = _copy(a3c_run, tmp_path)
    rows = _rows(run_dir)
    summary = gorila.train(resume=run_dir, verbose=True)
    err = capfd.readouterr().err
    assert summary["stop_reason"] == "budget" and summary["env_steps"] == first["env_steps"]
    assert (f"budget already used: {first['env_steps']:,} of 4,000 env steps; pass --total-steps above "
            f"{first['env_steps']:,} to train on") in err
    assert _rows(run_dir) == rows


def test_a_resumed_run_whose_target_was_reached_says_so_and_trains_nothing(tmp_path, capfd):
    run_dir = tmp_path / "run"
    first = gorila.train("lstsq", runtime="local", n=2_000, d=8, run_dir=run_dir)
    assert first["stop_reason"] == "target"
    capfd.readouterr()
    summary = gorila.train(resume=run_dir, verbose=True)
    lines = [line for line in capfd.readouterr().err.splitlines() if "already" in line]
    assert len(lines) == 1 and re.search(r"target already reached at version \d+; nothing to train$", lines[0])
    assert summary["stop_reason"] == "target" and summary["updates"] == first["updates"]


def test_the_time_to_target_counts_from_the_first_start_across_resumes(tmp_path):
    run_dir = tmp_path / "run"
    # too small a step to get anywhere in a second: the target is reached after the resume
    first = gorila.train("lstsq", runtime="local", n=2_000, d=8, lr=1e-4, iterations=10**9, time_limit_s=1.0,
                         run_dir=run_dir)
    assert first["stop_reason"] == "time_limit" and first["time_to_target_s"] is None
    summary = gorila.train(resume=run_dir, lr=0.5, time_limit_s=30.0)
    assert summary["stop_reason"] == "target"
    assert summary["train_time_to_target_s"] >= first["train_time_s"] >= 1.0
    assert summary["time_to_target_s"] >= summary["train_time_to_target_s"]


def test_resume_with_another_optimizer_is_refused_naming_the_flag(a3c_run, tmp_path, capsys):
    run_dir, _ = _copy(a3c_run, tmp_path)
    summary = (run_dir / "summary.json").read_bytes()
    with pytest.raises(ConfigError) as refused:
        gorila.train(resume=run_dir, optimizer="sgd")
    assert refused.value.field == "optimizer" and "resume with --optimizer" in refused.value.message
    assert main(["train", "--resume", str(run_dir), "--optimizer", "adam", "--quiet"]) == 2
    assert "--optimizer" in capsys.readouterr().err
    assert (run_dir / "summary.json").read_bytes() == summary  # the run's record untouched
