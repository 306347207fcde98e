"""``gorila bench speedup`` end to end on a tiny problem: CSV, PNG, bench.json, and the machine's
limit beside each speedup."""

import csv
import json
import statistics

import pytest

from gorila.cli import main

pytestmark = pytest.mark.smoke


@pytest.mark.heavy
def test_bench_speedup_writes_csv_png_and_bench_json_with_the_machine_limit(ray_local, tmp_path):
    assert main(["bench", "speedup", "--workers", "1,2", "--n", "20000", "--d", "20", "--tol", "1e-2",
                 "--repeats", "2", "--out", str(tmp_path)]) == 0
    runs = list(csv.DictReader(open(tmp_path / "runs.csv")))
    # interleaved repeats, the figures their medians
    assert [(int(r["workers"]), int(r["repeat"])) for r in runs] == [(1, 0), (2, 0), (1, 1), (2, 1)]
    median = {m: statistics.median(float(r["time_to_target_s"]) for r in runs if int(r["workers"]) == m)
              for m in (1, 2)}
    rows = list(csv.DictReader(open(tmp_path / "speedup.csv")))
    assert [int(r["workers"]) for r in rows] == [1, 2]
    assert float(rows[1]["time_to_target_s"]) == pytest.approx(median[2])
    assert float(rows[1]["speedup"]) == pytest.approx(median[1] / median[2])
    assert float(rows[1]["machine_limit"]) > 0
    # sync: every round carries m * d floats to the server, and every run reached the same target
    for r in runs:
        assert float(r["bytes_per_round_measured"]) == pytest.approx(int(r["workers"]) * 20 * 4)
    report = json.loads((tmp_path / "bench.json").read_text())
    assert report["workers"] == [1, 2] and report["speedup"][1] == pytest.approx(median[1] / median[2])
    assert report["rows"][1]["ratio"] == pytest.approx(report["speedup"][1] / report["limit"][1])
    assert (tmp_path / "speedup.png").stat().st_size > 0


@pytest.mark.parametrize("flag, value", [("--limit-rounds", "0"), ("--repeats", "0"), ("--log-every", "-1"),
                                         ("--workers", "1,x"), ("--workers", "0,2")])
def test_bench_speedup_refuses_bad_flags(capsys, tmp_path, flag, value):
    try:
        code = main(["bench", "speedup", flag, value, "--out", str(tmp_path / "out")])
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2 and flag in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before anything was written


@pytest.mark.heavy
@pytest.mark.timeout(300)
@pytest.mark.parametrize("algo", ["a3c", "apex", "dqn"])
def test_bench_speedup_of_an_rl_algorithm_gives_env_steps_per_s_beside_the_machine_limit(ray_local, tmp_path, algo):
    # A budget far below the target: every run stops at its budget, so no time to target exists.
    assert main(["bench", "speedup", "--algo", algo, "--workers", "1,2", "--repeats", "1", "--total-steps", "1500",
                 "--target", "1e9", "--limit-seconds", "0.5", "--out", str(tmp_path)]) == 0
    runs = list(csv.DictReader(open(tmp_path / "runs.csv")))
    assert [(int(r["workers"]), int(r["repeat"])) for r in runs] == [(1, 0), (2, 0)]
    for r in runs:
        assert int(r["env_steps"]) >= 1500 and r["reached_target"] == "False"
        assert float(r["env_steps_per_s"]) == pytest.approx(int(r["env_steps"]) / float(r["train_time_s"]))
    rows = list(csv.DictReader(open(tmp_path / "speedup.csv")))
    assert [int(r["workers"]) for r in rows] == [1, 2]
    for row, one in zip(rows, runs):  # one repeat: the median is the run
        assert float(row["env_steps_per_s"]) == pytest.approx(float(one["env_steps_per_s"]))
        assert float(row["limit_env_steps_per_s"]) > 0
        ratio = float(row["env_steps_per_s"]) / float(row["limit_env_steps_per_s"])
        assert float(row["ratio"]) == pytest.approx(ratio)
        assert row["time_to_target_s"] == "nan" and int(row["reached"]) == 0
    rates = [float(r["env_steps_per_s"]) for r in rows]
    assert float(rows[1]["speedup"]) == pytest.approx(rates[1] / rates[0])
    report = json.loads((tmp_path / "bench.json").read_text())
    assert report["workers"] == [1, 2] and report["settings"]["algo"] == algo and "n" not in report["settings"]
    assert report["env_steps_per_s"] == pytest.approx([float(r["env_steps_per_s"]) for r in rows])
    assert (tmp_path / "speedup.png").stat().st_size > 0


@pytest.mark.parametrize("flag, value", [("--total-steps", "0"), ("--limit-seconds", "0")])
def test_bench_speedup_refuses_bad_rl_flags(capsys, tmp_path, flag, value):
    try:
        code = main(["bench", "speedup", "--algo", "a3c", flag, value, "--out", str(tmp_path / "out")])
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2 and flag in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
