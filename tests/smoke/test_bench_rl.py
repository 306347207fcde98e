"""``gorila bench sampling`` and ``gorila bench learner`` on tiny budgets: each writes, per runtime,
the pipeline's figure, the limit measured in the same run, and their ratio to ``bench.json``."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.smoke

NATURE_CNN_PONG_PARAMETERS = 1_687_206  # Mnih et al. 2015's network with Pong's 6 actions


def bench(out, *args, timeout=240):
    result = subprocess.run([sys.executable, "-m", "gorila.cli", "bench", *args, "--out", str(out)],
                            capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr
    return json.loads((out / "bench.json").read_text())


def assert_rows(report, figure, runtimes):
    assert [row["runtime"] for row in report["rows"]] == runtimes
    for row in report["rows"]:
        assert row[figure] > 0 and row[f"limit_{figure}"] > 0
        assert row["ratio"] == pytest.approx(row[figure] / row[f"limit_{figure}"])


def test_bench_sampling_writes_both_figures_and_the_ratio_for_each_runtime(tmp_path):
    report = bench(tmp_path, "sampling", "--env", "CartPole-v1", "--actors", "2", "--envs-per-actor", "4",
                   "--seconds", "0.4", "--rounds", "2")
    assert_rows(report, "steps_per_s", ["local", "ray"])
    assert [row["actors"] for row in report["rows"]] == [1, 2]


def test_bench_learner_writes_both_figures_and_the_ratio_for_each_runtime(tmp_path):
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
])
def test_bad_measuring_flags_exit_2_naming_the_flag(capsys, args, flag):
    from gorila.cli import main

    assert main(["bench", *args]) == 2
    assert flag in capsys.readouterr().err
