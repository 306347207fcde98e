"""What the driver leaves behind (local runtime): everything saved when a signal or ``on_chunk``
stops a run, and TensorBoard scalars grouped as users look for them."""

import dataclasses
import json
import os
import signal
import time

import pytest

from gorila.agents.a3c.builder import make_plan
from gorila.agents.a3c.config import A3CConfig
from gorila.agents.rl_config import RLConfig
from gorila.checkpoint import load_checkpoint
from gorila.config import RunConfig
from gorila.driver.loop import FIRST_CHECKPOINT_S, run
from gorila.driver.stop import Interrupted
from gorila.metrics.terminal import QUIET, Terminal

COUNTERS = ("env_steps", "updates", "pushes_counted", "pushes_accepted", "pushes_rejected", "bytes_pushed",
            "bytes_pulled", "worker_restarts", "wall_time_from_start_s", "train_time_s", "cpu_time_s")


def _a3c(run_dir, **rl):
    run_config = RunConfig(algo="a3c", runtime="local", run_dir=run_dir, checkpoint_every_s=3600)
    rl = RLConfig(**{"stop_at_target": False, "eval_episodes": 2, "eval_every_s": 0.1, **rl})
    return run_config, make_plan(run_config, A3CConfig(), rl)


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_stops_the_run_after_its_chunk_and_everything_is_saved(tmp_path, signum, code):
    run_config, plan = _a3c(tmp_path / "run", total_steps=10_000_000)
    before = signal.getsignal(signum)
    chunks = []

    def on_chunk(placed):
        chunks.append(1)
        if len(chunks) == 3:
            os.kill(os.getpid(), signum)

    with pytest.raises(Interrupted) as stopped:
        run(run_config, plan, on_chunk, terminal=Terminal(QUIET))
    summary = stopped.value.summary
    assert stopped.value.exit_code == code and len(chunks) == 3  # no chunk after the signal
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["stop_reason"] == "interrupted" and saved["signal"] == signal.Signals(signum).name
    assert all(saved[name] is not None for name in COUNTERS) and saved["env_steps"] > 0
    assert saved == json.loads(json.dumps(summary))
    # the one checkpoint (the periodic one is an hour away) is the final one, taken after the signal
    _, meta = load_checkpoint(tmp_path / "run" / "checkpoints")
    assert meta["env_steps"] == summary["env_steps"] and meta["updates"] == summary["updates"]
    assert (tmp_path / "run" / "learning_curve.png").stat().st_size > 0
    assert signal.getsignal(signum) == before


def test_a_second_signal_still_saves_the_final_checkpoint_and_the_full_summary(tmp_path):
    """A double Ctrl-C: the second comes while the run is stopping; nothing is cut short half-way,
    the final checkpoint holds what the summary counts, and the exit code is the first signal's."""
    run_config, plan = _a3c(tmp_path / "run", total_steps=10_000_000)
    chunks = []

    def on_chunk(placed):
        chunks.append(1)
        if len(chunks) == 2:
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(Interrupted) as stopped:
        run(run_config, plan, on_chunk, terminal=Terminal(QUIET))
    summary = stopped.value.summary
    assert summary is not None and stopped.value.exit_code == 130 and len(chunks) == 2
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["stop_reason"] == "interrupted" and saved["signal"] == "SIGINT"
    assert all(saved[name] is not None for name in COUNTERS) and saved["env_steps"] > 0
    _, meta = load_checkpoint(tmp_path / "run" / "checkpoints")
    assert meta["env_steps"] == summary["env_steps"] and meta["updates"] == summary["updates"]


def test_the_first_periodic_checkpoint_comes_seconds_after_training_starts(tmp_path):
    """With checkpoints a minute apart (the default), a run still has one a few seconds in: one
    killed early on has something to resume from."""
    run_config, plan = _a3c(tmp_path / "run", total_steps=10_000_000)
    run_config = dataclasses.replace(run_config, checkpoint_every_s=60.0)
    started = []

    def on_chunk(placed):
        started[:] = started or [time.monotonic()]
        first = tmp_path / "run" / "checkpoints" / "ckpt-000001.json"
        return not first.exists() and time.monotonic() - started[0] < 20  # stop at the row after it (or give up)

    summary = run(run_config, plan, on_chunk, terminal=Terminal(QUIET))
    first = json.loads((tmp_path / "run" / "checkpoints" / "ckpt-000001.json").read_text())["meta"]
    assert first["train_time_s"] <= FIRST_CHECKPOINT_S + 2.0, first["train_time_s"]
    assert 0 < first["env_steps"] <= summary["env_steps"]


def test_on_chunk_returning_false_stops_the_run_at_that_row_with_everything_saved(tmp_path):
    """It sees the evaluations so far; the run stops at the row it says so (no later row), with the
    summary and a final checkpoint, as at a budget."""
    run_config, plan = _a3c(tmp_path / "run", total_steps=10_000_000)
    seen = []

    def on_chunk(placed):
        seen.append(len(placed.evaluations))
        return not placed.evaluations  # stop at the first row after an evaluation

    summary = run(run_config, plan, on_chunk, terminal=Terminal(QUIET))
    assert seen[-1] >= 1 and seen[:-1] == [0] * (len(seen) - 1), seen
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["stop_reason"] == "on_chunk" and saved["env_steps"] < 10_000_000
    assert len(saved["evaluations"]) >= seen[-1]
    _, meta = load_checkpoint(tmp_path / "run" / "checkpoints")
    assert meta["env_steps"] == summary["env_steps"]


def test_tensorboard_scalars_are_grouped_with_the_step_axis_and_hparams(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_config, plan = _a3c(tmp_path / "run", total_steps=3_000)
    run(run_config, plan, terminal=Terminal(QUIET))
    events = EventAccumulator(str(tmp_path / "run"), size_guidance={"tensors": 0})
    events.Reload()
    scalars = set(events.Tags()["scalars"])
    assert {"eval/return", "eval/version", "train/return", "train/loss", "train/env_steps", "ps/updates",
            "ps/pushes_rejected", "ps/bytes_pushed", "time/env_steps_per_s", "time/updates_per_s"} <= scalars
    assert all(tag.split("/")[0] in ("eval", "train", "ps", "replay", "time") for tag in scalars)
    assert "env steps" in events.Tensors("run/step_axis/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "_hparams_/session_start_info" in events.summary_metadata


def test_a_run_stops_within_one_step_per_worker_of_its_budget(tmp_path):
    """Chunks grow toward half a second, but never past what the budget has left."""
    cfg = A3CConfig(workers=2, envs_per_actor=4, unroll_length=5)
    run_config = RunConfig(algo="a3c", runtime="local", run_dir=tmp_path / "run", checkpoint_every_s=3600)
    rl = RLConfig(stop_at_target=False, total_steps=20_000, eval_episodes=1, eval_every_s=60)
    summary = run(run_config, make_plan(run_config, cfg, rl), terminal=Terminal(QUIET))
    one_step_each = cfg.workers * cfg.envs_per_actor * cfg.unroll_length
    assert 20_000 <= summary["env_steps"] <= 20_000 + one_step_each


def test_target_on_train100_stops_once_the_latest_100_training_episodes_average_the_target(tmp_path):
    import csv

    # CartPole's random policy averages about 22: 30 is reached within a few hundred episodes, on training alone
    run_config, plan = _a3c(tmp_path / "run", total_steps=300_000, target_return=30.0, target_on="train100",
                            stop_at_target=True)
    summary = run(run_config, plan, terminal=Terminal(QUIET))
    assert summary["stop_reason"] == "target" and summary["final_train_return"] >= 30.0
    assert summary["best_train_return"] >= summary["final_train_return"]
    rows = list(csv.DictReader(open(tmp_path / "run" / "metrics.csv")))
    assert float(rows[-1]["train_return"]) >= 30.0
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["target_on"] == "train100" and config["target"] == 30.0


def test_the_summary_says_how_long_after_its_parameters_were_taken_the_target_was_known(tmp_path):
    run_config, plan = _a3c(tmp_path / "run", total_steps=400_000, stop_at_target=True)
    summary = run(run_config, plan, terminal=Terminal(QUIET))
    assert summary["reached_target"]
    reaching = next(e for e in summary["evaluations"] if e.get("eval_return", 0) >= summary["target_return"])
    # the target was known when that evaluation came in: its parameters were taken latency seconds earlier
    assert reaching["eval_latency_s"] == summary["target_eval_latency_s"]
    assert abs(reaching["eval_train_time_s"] + summary["target_eval_latency_s"]
               - summary["train_time_to_target_s"]) < 1e-6
    assert summary["eval_latency_s_max"] >= summary["eval_latency_s_mean"] > 0


SHUTDOWN = ("stop_s", "last_chunk_s", "last_evaluation_s", "final_checkpoint_s", "summary_s", "runtime_stopped_s",
            "learning_curve_s")


def test_the_summary_stamps_each_stage_of_the_runs_end_in_order(tmp_path):
    """From the stop to the learning curve, each stage's time since the start: after the start-up's,
    in the order the run's end takes them (the summary and the final checkpoint before the runtime
    stops); ``shutdown_s`` is the span from the last chunk's end. summary.json, written before the
    runtime stopped, gets the stages after it too, as the returned summary has them."""
    run_config, plan = _a3c(tmp_path / "run", total_steps=3_000)
    summary = run(run_config, plan, terminal=Terminal(QUIET))
    stamps = summary["shutdown"]
    assert tuple(stamps) == SHUTDOWN  # a budget's stop waits for the last evaluation: every stage is there
    times = [stamps[stage] for stage in SHUTDOWN]
    assert times == sorted(times) and times[0] >= max(summary["startup"].values()) >= 0
    assert stamps["final_checkpoint_s"] <= summary["wall_time_from_start_s"] <= stamps["summary_s"]
    assert summary["shutdown_s"] == stamps["learning_curve_s"] - stamps["last_chunk_s"] >= 0
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["shutdown"] == stamps and saved["shutdown_s"] == summary["shutdown_s"]
