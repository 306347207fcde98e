"""``gorila bench menger`` end to end on a tiny sweep: CSVs, PNGs and bench.json with the keys
the figures are read by; a cache's reads never reach the server more than once per version per
node, and each read's age (versions and seconds behind the learner) is reported for every mode."""

import csv
import json

import pytest

from gorila.cli import main

pytestmark = [pytest.mark.smoke, pytest.mark.timeout(240)]


@pytest.mark.heavy  # about 10 s: `make test-heavy` runs it
def test_bench_menger_writes_both_figures(ray_local, tmp_path):
    assert main(["bench", "menger", "--readers", "2", "--writers", "2", "--payloads", "16K", "--params", "100000",
                 "--groups", "2", "--seconds", "0.3", "--publish-ms", "20", "--out", str(tmp_path)]) == 0
    reads = list(csv.DictReader(open(tmp_path / "reads.csv")))
    assert [(r["cache"], int(r["readers"])) for r in reads] == [("none", 2), ("poll", 2), ("push", 2)]
    for cached in reads[1:]:
        assert float(cached["server_reads_per_version_per_node"]) <= 1.0 + 1e-9
    assert all(float(r["age_versions_mean"]) >= 0 and float(r["age_ms_p99"]) >= 0 for r in reads)
    writes = list(csv.DictReader(open(tmp_path / "writes.csv")))
    assert [(int(r["shards"]), int(r["writers"])) for r in writes] == [(1, 2), (2, 2)]
    assert all(int(r["adds"]) > 0 for r in writes)
    report = json.loads((tmp_path / "bench.json").read_text())
    assert set(report["read_latency_ms"]) == {"none", "poll", "push"} and "2" in report["server_reads_per_s"]["push"]
    assert set(report["parameter_age"]["push"]["2"]) == {"versions_mean", "versions_p99", "ms_mean", "ms_p99"}
    # the reduction at each count of readers, beside the seed's (512 actors, 16 MB: ~4.0x lower)
    reduction = report["read_latency_reduction"]
    assert reduction["seed"] == {"readers": 512, "model_mb": 16, "read_latency_reduction": 4.0}
    none, poll, push = (float(r["read_latency_mean_ms"]) for r in reads)
    assert reduction["by_readers"]["2"] == pytest.approx(none / push)
    assert reduction["by_readers_poll"]["2"] == pytest.approx(none / poll)
    assert set(report["write_latency_ms"]) == {"single", "sharded"} and "16K" in report["insert_per_s"]["single"]
    assert set(report["write_latency_ms"]["single"]["16K"]["2"]) == {"mean", "p99", "max"}  # every cell's tail
    assert (tmp_path / "reads.png").stat().st_size > 0 and (tmp_path / "writes.png").stat().st_size > 0


@pytest.mark.parametrize("flag, value", [("--readers", "0"), ("--payloads", "2M"), ("--seconds", "0"),
                                         ("--model-mb", "0"), ("--buffers-per-node", "0"), ("--caches", "node")])
def test_bad_flags_are_refused_before_anything_starts(capsys, tmp_path, flag, value):
    with pytest.raises(SystemExit) as exit_:  # argparse refuses it, as the command line would
        main(["bench", "menger", flag, value, "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2 and flag in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
