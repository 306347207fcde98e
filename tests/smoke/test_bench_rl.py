"""``gorila bench sampling`` and ``gorila bench learner`` on tiny budgets: each writes, per runtime,
the pipeline's figure, the limit measured in the same run, and their ratio to ``bench.json``."""

import argparse
import json
import time

import pytest

from gorila.bench.pipeline import limit_parts_at_once, segments_per_batch
from gorila.cli import main

pytestmark = pytest.mark.smoke

NATURE_CNN_PONG_PARAMETERS = 1_687_206  # Mnih et al. 2015's network with Pong's 6 actions


def bench(out, *args):
    """``gorila bench ARGS --out OUT`` in this process (its Ray runs join the test's); the report."""
    assert main(["bench", *args, "--out", str(out)]) == 0
    return json.loads((out / "bench.json").read_text())


def assert_rows(report, figure, runtimes):
    assert [row["runtime"] for row in report["rows"]] == runtimes
    for row in report["rows"]:
        assert row[figure] > 0 and row[f"limit_{figure}"] > 0
        assert row["ratio"] == pytest.approx(row[figure] / row[f"limit_{figure}"])


@pytest.mark.heavy
def test_bench_sampling_writes_each_inference_mode_beside_the_combined_limit(ray_local, tmp_path):
    report = bench(tmp_path, "sampling", "--env", "CartPole-v1", "--actors", "3", "--envs-per-actor", "4",
                   "--seconds", "0.4", "--rounds", "2")
    assert_rows(report, "steps_per_s", ["ray", "ray"])
    # The limit's network runs the pipeline's batches: an actor's own envs (local); the server's
    # batch, one group (half the envs) of each actor (central).
    assert [(row["inference"], row["actors"], row["batch"]) for row in report["rows"]] == [
        ("local", 3, 4), ("central", 3, 6)]
    for row in report["rows"]:  # env steps and forward passes share the cores
        assert row["limit_steps_per_s"] == pytest.approx(
            1 / (1 / row["env_steps_per_s"] + 1 / row["inference_obs_per_s"]))


@pytest.mark.heavy
def test_bench_sampling_of_pong_with_central_inference_writes_its_headline(ray_local, tmp_path):
    report = bench(tmp_path, "sampling", "--env", "ALE/Pong-v5", "--inference", "central", "--actors", "1",
                   "--envs-per-actor", "2", "--seconds", "0.4", "--rounds", "2")
    (row,) = report["rows"]
    assert row["inference"] == "central" and row["batch"] == 1
    assert report["steps_per_s"] == row["steps_per_s"] > 0
    assert report["ratio"] == pytest.approx(report["steps_per_s"] / report["limit_steps_per_s"])


@pytest.mark.heavy
def test_bench_learner_writes_both_figures_and_the_ratio_for_each_runtime(ray_local, tmp_path):
    report = bench(tmp_path, "learner", "--env", "CartPole-v1", "--batch-size", "16", "--fill", "500",
                   "--seconds", "0.4", "--rounds", "2")
    assert_rows(report, "updates_per_s", ["local", "ray"])


def test_bench_learner_runs_the_nature_cnn_on_pong(tmp_path):
    report = bench(tmp_path, "learner", "--env", "ALE/Pong-v5", "--runtime", "local", "--batch-size", "4",
                   "--fill", "100", "--seconds", "0.4", "--rounds", "2")
    assert report["parameters"] == NATURE_CNN_PONG_PARAMETERS
    assert_rows(report, "updates_per_s", ["local"])


@pytest.mark.parametrize("args, flag", [
    (["sampling", "--rounds", "0"], "--rounds"),
    (["sampling", "--envs-per-actor", "0"], "--envs-per-actor"),
    (["learner", "--seconds", "0"], "--seconds"),
    (["learner", "--fill", "0"], "--fill"),
    (["learner", "--algo", "impala", "--batch-size", "0"], "--batch-size"),
])
def test_bad_measuring_flags_exit_2_naming_the_flag(capsys, args, flag):
    assert main(["bench", *args]) == 2
    assert flag in capsys.readouterr().err


@pytest.mark.parametrize("algo", ["impala", "ppo"])
def test_bench_learner_of_impala_and_ppo_writes_samples_per_s_beside_the_bare_loop(tmp_path, algo):
    report = bench(tmp_path, "learner", "--algo", algo, "--env", "CartPole-v1", "--runtime", "local",
                   "--batch-size", "2", "--seconds", "0.4", "--rounds", "2")
    assert_rows(report, "samples_per_s", ["local"])
    assert report["rows"][0]["algo"] == algo and report["settings"]["batch_size"] == 2


@pytest.mark.heavy
@pytest.mark.parametrize("algo, mode", [("impala", None), ("ppo", None), ("ppo", "async"), ("dqn", None),
                                        ("apex", None)])
def test_bench_pipeline_writes_the_runs_steady_rate_beside_the_limit_of_its_parts(tmp_path, algo, mode):
    report = bench(tmp_path, "pipeline", "--algo", algo, "--env", "CartPole-v1", "--runtime", "local",
                   "--seconds", "5", "--limit-seconds", "0.3", *(["--mode", mode] if mode else []))
    (row,) = report["rows"]
    parts = [row[f"{name}_us_per_frame"] for name in ("env", "act", "learn")]
    assert row["frames_per_s"] > 0 and all(us > 0 for us in parts)
    assert row["limit_frames_per_s"] == pytest.approx(row["cores"] / (sum(parts) / 1e6))
    assert row["ratio"] == pytest.approx(row["frames_per_s"] / row["limit_frames_per_s"])
    alone = [row[f"{name}_us_per_frame_alone"] for name in ("env", "act", "learn")]
    assert all(us > 0 for us in alone)
    assert row["limit_alone_frames_per_s"] == pytest.approx(row["cores"] / (sum(alone) / 1e6))
    assert row["ratio_alone"] == pytest.approx(row["frames_per_s"] / row["limit_alone_frames_per_s"])
    assert row["busy_cores"] > 0 and row["updates_per_frame"] > 0
    assert mode is None or row["mode"] == mode
    run = json.loads((tmp_path / "run" / "config.json").read_text())[algo]
    if algo == "dqn":  # its bundles act and learn in the same processes
        assert row["learner_bound_frames_per_s"] is None
    else:
        assert row["learner_bound_frames_per_s"] == pytest.approx(run["learners"] * 1e6 / row["learn_us_per_frame"])
    # the bare loop learns from batches as big as the run's: PPO's default is a segment of each of its actors
    assert row["segments_per_batch"] == {"ppo": run.get("actors"), "impala": run.get("batch_size")}.get(algo, 1)


def test_a_part_that_fails_in_one_of_the_processes_timing_at_once_is_an_error_not_a_wait():
    args = argparse.Namespace(algo="impala", env="NoSuchEnv-v0", seed=0, limit_seconds=0.2, mode=None)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"2 processes at once failed: exit codes \[1"):
        limit_parts_at_once(args, updates_per_frame=1.0, segments=1, copies=2, timeout_s=120.0)
    assert time.monotonic() - started < 100  # the failure is seen, not waited out


@pytest.mark.parametrize("algo, settings, segments", [
    ("ppo", {"batch_size": None, "actors": 2, "learners": 1}, 2),
    ("ppo", {"batch_size": None, "actors": 3, "learners": 2}, 2),
    ("ppo", {"batch_size": 4, "actors": 2, "learners": 1}, 4),
    ("impala", {"batch_size": 3, "actors": 2}, 3),
    ("dqn", {"actors": 2}, 1),
])
def test_the_limit_learns_from_batches_of_the_runs_segments(algo, settings, segments):
    assert segments_per_batch(algo, settings) == segments
