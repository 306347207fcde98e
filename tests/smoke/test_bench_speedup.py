"""``gorila bench speedup`` end to end on a tiny problem: CSV, PNG, and the machine's limit beside each speedup."""

import csv
import subprocess
import sys

import pytest

pytestmark = pytest.mark.smoke


def test_bench_speedup_writes_csv_and_png_with_the_machine_limit(tmp_path):
    result = subprocess.run([sys.executable, "-m", "gorila.cli", "bench", "speedup", "--workers", "1,2",
                             "--n", "20000", "--d", "20", "--tol", "1e-2",
                             "--repeats", "2", "--out", str(tmp_path)], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "limit" in result.stdout
    rows = list(csv.DictReader(open(tmp_path / "speedup.csv")))
    assert [int(r["workers"]) for r in rows] == [1, 2]
    assert float(rows[0]["speedup"]) == pytest.approx(1.0) and float(rows[0]["machine_limit"]) == pytest.approx(1.0)
    assert float(rows[1]["machine_limit"]) > 0
    # sync: every round carries m * d floats to the server
    assert float(rows[1]["bytes_per_round_measured"]) == pytest.approx(float(rows[1]["bytes_per_round_analytic"]))
    runs = list(csv.DictReader(open(tmp_path / "runs.csv")))
    # interleaved repeats, the figures their medians
    assert [(int(r["workers"]), int(r["repeat"])) for r in runs] == [(1, 0), (2, 0), (1, 1), (2, 1)]
    times = sorted(float(r["time_to_target_s"]) for r in runs if r["workers"] == "2")
    assert float(rows[1]["time_to_target_s"]) == pytest.approx(sum(times) / 2)
    assert (tmp_path / "speedup.png").stat().st_size > 0


@pytest.mark.parametrize("flag, value", [("--limit-rounds", "0"), ("--repeats", "0"), ("--log-every", "-1"),
                                         ("--workers", "1,x"), ("--workers", "0,2")])
def test_bench_speedup_refuses_bad_flags(flag, value):
    result = subprocess.run([sys.executable, "-m", "gorila.cli", "bench", "speedup", flag, value],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and flag in result.stderr
