"""The ``gorila`` command end to end on tiny budgets."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.smoke


def gorila(*args, timeout=240):
    return subprocess.run([sys.executable, "-m", "gorila.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("args, flag", [
    (["--workers", "0"], "--workers"),
    (["--mode", "bogus"], "--mode"),
    (["--mode", "semi-async", "--aggregate", "0"], "--aggregate"),
    (["--mode", "semi-async", "--count-within", "5", "--accept-within", "3"], "--accept-within"),
    (["--mode", "sync", "--max-staleness", "3"], "--max-staleness"),
    (["--workers", "9999999"], "--workers"),
])
def test_invalid_flags_exit_2_naming_the_flag(args, flag):
    result = gorila("train", "--algo", "lstsq", *args, timeout=60)
    assert result.returncode == 2, result
    assert flag in result.stderr


def test_train_lstsq_writes_the_run_outputs(tmp_path):
    result = gorila("train", "--algo", "lstsq", "--runtime", "local", "--workers", "2", "--mode", "sync",
                    "--n", "4000", "--d", "8", "--run-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    for key in ("algo", "mode", "workers", "shards", "wall_time_s", "cpu_time_s", "updates", "pushes_counted",
                "pushes_accepted", "pushes_rejected", "bytes_pushed", "bytes_pulled", "final_loss"):
        assert key in summary, key
    assert summary["reached_target"] and summary["pushes_counted"] == 2 * summary["updates"]
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["run"]["workers"] == 2
    lines = (tmp_path / "metrics.csv").read_text().splitlines()
    assert lines[0].startswith("step,time_s,version,loss") and len(lines) > 2
    assert any(p.name.startswith("events.out.tfevents") for p in tmp_path.iterdir())


def test_bench_ps_prints_the_ratio_to_memcpy():
    result = gorila("bench", "ps", "--params", "100000", "--rounds", "5")
    assert result.returncode == 0, result.stderr
    assert "x memcpy" in result.stdout and "push+pull" in result.stdout


def test_info_lists_versions():
    result = gorila("info", timeout=60)
    assert result.returncode == 0 and "torch" in result.stdout and "ray" in result.stdout
