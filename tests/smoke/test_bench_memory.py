"""``gorila bench memory`` end to end: a short default run's peak memory per role and summed, beside
the bare Ray limit sampled the same way, in ``bench.json``."""

import json

import pytest

from gorila.cli import main

pytestmark = [pytest.mark.smoke, pytest.mark.heavy]


def test_bench_memory_writes_each_role_and_the_sums_beside_the_limit(tmp_path):
    assert main(["bench", "memory", "--time-limit-s", "2", "--hold-s", "0", "--every-s", "0.3",
                 "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "bench.json").read_text())
    run = {row["role"]: row for row in report["rows"] if row["which"] == "run"}
    limit = {row["role"] for row in report["rows"] if row["which"] == "limit"}
    assert {"driver", "shard-0", "bundle-0", "bundle-1", "evaluator-0", "ray:raylet", "reaper"} <= run.keys()
    assert {"driver", "ray:raylet"} <= limit and "shard-0" not in limit
    assert report["peak_pss_mib"] > report["limit_peak_pss_mib"] > 0
    assert report["ratio"] == pytest.approx(report["peak_pss_mib"] / report["limit_peak_pss_mib"])
    assert all(row["peak_rss_mib"] >= row["peak_pss_mib"] > 0 for row in run.values())
