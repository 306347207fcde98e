"""``gorila bench sampling`` and ``gorila bench learner`` on tiny budgets: each prints, per runtime,
the pipeline's figure, the limit measured in the same run, and their ratio."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.smoke


def bench(*args, timeout=240):
    result = subprocess.run([sys.executable, "-m", "gorila.cli", "bench", *args], capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, result.stderr
    return result.stdout


def table(stdout: str) -> dict[str, tuple[float, float, float]]:
    """Runtime name -> (pipeline, limit, ratio) from the rows of the printed table."""
    rows = {}
    for line in stdout.splitlines():
        fields = line.split()
        if fields and fields[0] in ("local", "ray"):
            rows[fields[0]] = tuple(float(x.replace(",", "")) for x in fields[-3:])
    return rows


def assert_figures(rows, runtimes):
    assert sorted(rows) == sorted(runtimes)
    for pipeline, limit, ratio in rows.values():
        assert pipeline > 0 and limit > 0
        assert ratio == pytest.approx(pipeline / limit, abs=0.01)


def test_bench_sampling_prints_both_figures_and_the_ratio_for_each_runtime():
    out = bench("sampling", "--env", "CartPole-v1", "--actors", "2", "--envs-per-actor", "4", "--seconds", "0.4",
                "--rounds", "2")
    assert "limit:" in out and "counted:" in out
    assert_figures(table(out), ["local", "ray"])


def test_bench_learner_prints_both_figures_and_the_ratio_for_each_runtime():
    out = bench("learner", "--env", "CartPole-v1", "--batch-size", "16", "--fill", "500", "--seconds", "0.4",
                "--rounds", "2")
    assert "limit:" in out and "parameters" in out
    assert_figures(table(out), ["local", "ray"])


def test_bench_learner_runs_the_nature_cnn_on_pong():
    out = bench("learner", "--env", "ALE/Pong-v5", "--runtime", "local", "--batch-size", "4", "--fill", "100",
                "--seconds", "0.4", "--rounds", "2")
    assert "1,68" in out  # the Nature CNN's parameter count
    assert_figures(table(out), ["local"])


@pytest.mark.parametrize("args, flag", [
    (["sampling", "--rounds", "0"], "--rounds"),
    (["sampling", "--envs-per-actor", "0"], "--envs-per-actor"),
    (["learner", "--seconds", "0"], "--seconds"),
    (["learner", "--fill", "0"], "--fill"),
])
def test_bad_measuring_flags_exit_2_naming_the_flag(args, flag):
    result = subprocess.run([sys.executable, "-m", "gorila.cli", "bench", *args], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2 and flag in result.stderr
