"""``gorila simulate`` end to end on a tiny sweep from a hand-made calibration: CSV, PNG,
bench.json with workers, speedup and staleness_mean; bad flags refused with exit 2."""

import csv
import json
import subprocess
import sys

import pytest

from gorila.sim.calibration import Calibration, Workload

pytestmark = pytest.mark.smoke


@pytest.fixture
def calibration(tmp_path):
    work = Workload(algo="lstsq", params=400, optimizer="sgd", env_steps_per_gradient=25_000, divides_data=True,
                    pipelined=False, compute_s={1: (0.010, 0.011), 2: (0.006, 0.0065)})
    return Calibration(cpus=2, transport="shm", latency_s=1e-4, bandwidth_Bps=1e9, apply_points={"sgd": [[400, 2e-5]]},
                       workloads={"lstsq": work}).save(tmp_path / "cal.json")


def test_simulate_writes_predictions_staleness_png_and_bench_json(tmp_path, calibration):
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "gorila", "simulate", "--calibration", str(calibration),
                             "--algo", "lstsq", "--mode", "sync,async", "--workers", "1,2,4",
                             "--stragglers", "0.1:4", "--cores-per-node", "8", "--out", str(out)],
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = list(csv.DictReader(open(out / "predictions.csv")))
    curves = {(r["mode"], r["condition"]) for r in rows}
    assert curves == {("sync", ""), ("sync", " + stragglers"), ("async", ""), ("async", " + stragglers")}
    assert [int(r["workers"]) for r in rows if r["mode"] == "sync" and not r["condition"]] == [1, 2, 4]
    sync = {int(r["workers"]): r for r in rows if r["mode"] == "sync" and not r["condition"]}
    assert float(sync[1]["speedup"]) == 1.0 and float(sync[4]["staleness_mean"]) == 0.0
    report = json.loads((out / "bench.json").read_text())
    assert report["bench"] == "simulate" and report["workers"] == [1, 2, 4]
    assert report["speedup"]["sync"] == pytest.approx([float(sync[m]["speedup"]) for m in (1, 2, 4)])
    assert len(report["staleness_mean"]["async + stragglers"]) == 3
    # each row beside its limit, the ideal speedup
    assert all(r["limit"] == r["workers"] and r["ratio"] == pytest.approx(r["speedup"] / r["workers"])
               for r in report["rows"])
    histograms = list(csv.DictReader(open(out / "staleness.csv")))
    assert {r["staleness"] for r in histograms if r["mode"] == "sync"} == {"0"}
    assert (out / "speedup.png").stat().st_size > 0


@pytest.mark.parametrize("args, flag", [
    (["--stragglers", "2:4"], "--stragglers"), (["--workers", "0,2"], "--workers"), (["--mode", "fast"], "--mode"),
    (["--shards", "0"], "--shards"), (["--max-staleness", "1", "--mode", "sync"], "--max-staleness"),
    (["--aggregate", "0", "--mode", "semi-async"], "--aggregate"), (["--slow-worker", "0.5"], "--slow-worker"),
    (["--algo", "a3c"], "--calibration"), ([], None)])
def test_simulate_refuses_bad_flags(capsys, tmp_path, calibration, args, flag):
    from gorila.cli import main

    argv = ["simulate", "--out", str(tmp_path / "out"), *args]
    if flag != "--calibration":
        argv += ["--calibration", str(calibration if flag else tmp_path / "missing.json")]
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2 and (flag or "--calibration") in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before anything was written
