"""What a user keeps of a run: the parameters an evaluation judged are the ones saved with its score
(the ``best`` checkpoint), beside the periodic ``last`` ones (local runtime, CartPole A3C)."""

import json
import shutil
import subprocess
import sys

import pytest

import gorila
from gorila.errors import ConfigError

TARGET = 60.0
RUN = dict(runtime="local", total_steps=60_000, target_return=TARGET, eval_episodes=3, eval_every_s=0.2,
           checkpoint_every_s=0.5, seed=1)


@pytest.fixture(scope="module")
def stopped_at_target(tmp_path_factory):
    """A run that stops at its target: its directory and summary."""
    run_dir = tmp_path_factory.mktemp("best") / "run"
    summary = gorila.train("a3c", run_dir=run_dir, **RUN)
    assert summary["stop_reason"] == "target", summary["stop_reason"]
    return run_dir, summary


def test_the_run_that_reached_its_target_hands_over_the_policy_that_reached_it(stopped_at_target):
    run_dir, summary = stopped_at_target
    best = summary["best_checkpoint"]
    reaching = [e for e in summary["evaluations"] if e["eval_return"] >= TARGET][0]
    assert best["version"] == reaching["eval_version"] and best["eval_return"] == reaching["eval_return"]
    # gorila eval, as a user types it, with the episodes and seed of the evaluation that stopped the run
    out = subprocess.run([sys.executable, "-m", "gorila", "eval", str(run_dir), "--episodes", str(RUN["eval_episodes"]),
                          "--seed", str(reaching["eval_seed"]), "--noop-max", "30"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    scored = json.loads(out.stdout)
    assert scored["checkpoint"] == "best" and scored["checkpoint_version"] == best["version"]
    assert scored["mean"] == pytest.approx(reaching["eval_return"]) and scored["mean"] >= TARGET


def test_last_is_the_newest_periodic_checkpoint_and_best_its_own(stopped_at_target):
    run_dir, summary = stopped_at_target
    best = gorila.load_policy(run_dir)
    last = gorila.load_policy(run_dir, checkpoint="last")
    assert (best.checkpoint, last.checkpoint) == ("best", "last")
    assert best.meta["version"] == summary["best_checkpoint"]["version"]
    assert last.env_steps == summary["env_steps"]
    with pytest.raises(ConfigError, match="best, last"):
        gorila.load_policy(run_dir, checkpoint="newest")


def test_an_evaluation_is_placed_where_its_parameters_were_taken(stopped_at_target):
    _, summary = stopped_at_target
    for evaluation in summary["evaluations"]:
        # taken before it came in, never after
        assert evaluation["eval_env_steps"] <= evaluation["env_steps"]
        assert 0 <= evaluation["eval_train_time_s"] <= summary["train_time_s"]
        assert evaluation["eval_min"] <= evaluation["eval_return"] <= evaluation["eval_max"]
    steps = [e["eval_env_steps"] for e in summary["evaluations"]]
    assert steps == sorted(steps)


def test_resuming_a_run_that_reached_its_target_says_so_in_one_line(stopped_at_target, tmp_path, capfd):
    run_dir = shutil.copytree(stopped_at_target[0], tmp_path / "run")
    best = stopped_at_target[1]["best_checkpoint"]["version"]
    capfd.readouterr()
    summary = gorila.train(resume=run_dir, verbose=True)
    lines = [line for line in capfd.readouterr().err.splitlines() if "already" in line]
    assert len(lines) == 1 and lines[0].endswith(
        f"target already reached at version {best}; pass --no-stop-at-target to train on")
    assert summary["stop_reason"] == "target" and summary["env_steps"] == stopped_at_target[1]["env_steps"]


def test_tensorboard_shows_each_evaluation_where_its_parameters_were_taken(stopped_at_target):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir, summary = stopped_at_target
    events = EventAccumulator(str(run_dir))
    events.Reload()
    shown = events.Scalars("eval/return")
    assert [e.step for e in shown] == [e["eval_env_steps"] for e in summary["evaluations"]]
    assert [e.value for e in shown] == pytest.approx([e["eval_return"] for e in summary["evaluations"]])
