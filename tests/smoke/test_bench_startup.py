"""``gorila bench startup`` end to end: the default run's start-up stages beside the bare Ray limit
and the run's own layout of processes, in ``bench.json``; and the layout's command refusing counts
that start nothing."""

import json
import subprocess
import sys

import pytest

from gorila.cli import main

pytestmark = pytest.mark.smoke


@pytest.mark.heavy
def test_bench_startup_times_the_run_beside_the_bare_limit_and_the_runs_own_layout(tmp_path):
    assert main(["bench", "startup", "--repeats", "1", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "bench.json").read_text())
    # The default run: two bundles (torch), one shard and the evaluator (no torch).
    assert report["layout_processes"] == {"torch": 2, "plain": 2}
    (row,) = report["rows"]
    assert row["limit_s"] > 0 and row["layout_s"] > 0
    assert row["runtime_s"] <= row["processes_s"] <= row["first_step_s"]
    assert report["ratio"] == pytest.approx(report["first_step_s"] / report["limit_s"])
    assert report["layout_ratio"] == pytest.approx(report["first_step_s"] / report["layout_s"])


@pytest.mark.parametrize("counts", [["--torch", "0", "--plain", "0"], ["--torch", "-1", "--plain", "2"]])
def test_the_bare_layout_refuses_counts_that_start_no_process_naming_them(counts):
    done = subprocess.run([sys.executable, "-m", "gorila.runtime.bare_ray", *counts], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    assert "--torch and --plain" in done.stderr and not done.stdout
