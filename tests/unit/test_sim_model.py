"""The simulator: what the rules must do to time, staleness and load, on hand-made costs."""

import math

import pytest

from gorila.errors import ConfigError
from gorila.params import UpdateRule
from gorila.sim.calibration import Calibration, Workload
from gorila.sim.cluster import Cluster
from gorila.sim.model import ACK_BYTES, Setup, Stragglers, simulate

# A gradient of ~10 ms with some spread; each worker has its own data (as A3C), replies awaited (as lstsq).
WORK = Workload(algo="lstsq", params=1000, optimizer="sgd", env_steps_per_gradient=64, divides_data=False,
                pipelined=False, compute_s={1: (0.009, 0.010, 0.011, 0.012)})
PIPELINED = Workload(**{**WORK.__dict__, "pipelined": True})
BIG = 64  # cores per node: no worker count below shares a core
CLUSTER = Cluster(nodes=1, cores_per_node=BIG, latency_s=100e-6, bandwidth_Bps=1e9, cache_read_s=50e-6)


def run(mode, workers, *, work=WORK, cluster=CLUSTER, shards=1, gradients=1000, **kwargs):
    knobs = {k: kwargs.pop(k) for k in ("max_staleness",) if k in kwargs}
    rule = UpdateRule.for_mode(mode, workers, **knobs)
    return simulate(Setup(rule=rule, workers=workers, shards=shards, workload=work, cluster=cluster,
                          apply_s=(20e-6,) * shards, gradients=gradients, **kwargs), seed=1)


def test_one_worker_sync_is_async():
    sync, asynchronous = run("sync", 1), run("async", 1)
    assert sync.gradients_per_s == pytest.approx(asynchronous.gradients_per_s, rel=1e-9)
    assert sync.updates_per_s == pytest.approx(asynchronous.updates_per_s, rel=1e-9)


@pytest.mark.parametrize("mode", ["sync", "async", "semi-async"])
def test_one_worker_is_never_stale(mode):
    prediction = run(mode, 1)
    assert set(prediction.staleness) == {0}
    assert prediction.staleness_mean == 0.0
    assert prediction.rejected_fraction == 0.0


def test_one_worker_rate_is_one_gradient_per_compute_and_round_trip():
    # 1 / (mean compute + push and reply: 2 x (latency + bytes / bandwidth) + apply)
    one = run("async", 1, gradients=4000)
    round_trip = 2 * (100e-6 + 4000 / 1e9) + 20e-6
    assert one.gradients_per_s == pytest.approx(1 / (0.0105 + round_trip), rel=0.03)


def test_a_pipelined_worker_computes_on_the_version_before_its_last_push():
    prediction = run("async", 1, work=PIPELINED)
    assert set(prediction.staleness) == {1}


def test_sync_never_mixes_versions_and_applies_one_update_per_round():
    prediction = run("sync", 8)
    assert set(prediction.staleness) == {0}
    # (the measured window may cut a round)
    assert prediction.updates_per_s == pytest.approx(prediction.gradients_per_s / 8, rel=0.02)


def test_async_staleness_grows_with_workers():
    assert run("async", 2).staleness_mean < run("async", 8).staleness_mean < run("async", 32).staleness_mean


def test_stragglers_slow_sync_more_than_async():
    stragglers = Stragglers(0.05, 4.0)
    sync, sync_slow = run("sync", 32), run("sync", 32, stragglers=stragglers)
    asynchronous, async_slow = run("async", 32), run("async", 32, stragglers=stragglers)
    assert sync_slow.updates_per_s < sync.updates_per_s
    sync_loss = sync_slow.gradients_per_s / sync.gradients_per_s
    async_loss = async_slow.gradients_per_s / asynchronous.gradients_per_s
    # 5% at 4x costs an async worker 15% of its rate; a sync round waits for its slowest of 32.
    assert async_loss == pytest.approx(1 / 1.15, rel=0.05)
    assert sync_loss < async_loss - 0.2


def test_a_slow_worker_holds_back_every_sync_round_but_only_itself_under_async():
    fixed = Workload(**{**WORK.__dict__, "compute_s": {1: (0.010,)}})
    sync, sync_slow = run("sync", 4, work=fixed), run("sync", 4, work=fixed, slow_worker=3.0)
    asynchronous, async_slow = run("async", 4, work=fixed), run("async", 4, work=fixed, slow_worker=3.0)
    assert sync_slow.gradients_per_s / sync.gradients_per_s == pytest.approx(1 / 3, rel=0.05)
    # three workers at full speed and one at a third: 10 / 12 of the rate
    assert async_slow.gradients_per_s / asynchronous.gradients_per_s == pytest.approx((3 + 1 / 3) / 4, rel=0.05)


def test_max_staleness_zero_rejects_pushes_of_concurrent_workers():
    assert run("async", 4, max_staleness=0).rejected_fraction > 0
    assert run("async", 4).rejected_fraction == 0


def test_more_workers_than_cores_share_them():
    two_cores = Cluster(nodes=1, cores_per_node=2, latency_s=100e-6, bandwidth_Bps=1e9, cache_read_s=50e-6)
    assert run("async", 8, cluster=two_cores).gradients_per_s == pytest.approx(
        run("async", 2, cluster=two_cores).gradients_per_s, rel=0.05)


def test_a_node_cache_is_sent_each_version_once_and_saves_server_bytes():
    nodes = Cluster(nodes=4, cores_per_node=BIG, latency_s=100e-6, bandwidth_Bps=1e9, cache_read_s=50e-6)
    direct = run("sync", 64, cluster=nodes, gradients=2000)
    cached = run("sync", 64, cluster=nodes, gradients=2000, param_cache=True)
    assert cached.cache_versions_per_s == pytest.approx(cached.updates_per_s, rel=0.05)  # one per version, 1 shard
    pushed = 64 * 4000  # every worker's gradient reaches the shard either way
    assert direct.bytes_per_update == pytest.approx(pushed + 64 * 4000)  # every reply carries the parameters
    assert cached.bytes_per_update == pytest.approx(pushed + 4 * 4000 + 64 * ACK_BYTES)  # one pull per node
    assert set(cached.staleness) == {0}


def test_sharding_splits_the_server_link_load():
    heavy = Workload(**{**WORK.__dict__, "params": 5_000_000})  # 20 MB: the link is the bottleneck
    one, four = run("async", 16, work=heavy), run("async", 16, work=heavy, shards=4)
    assert one.shard_link_busy > 0.9
    assert four.gradients_per_s > 2 * one.gradients_per_s


def test_divided_data_scales_compute_with_the_share():
    divided = Workload(**{**WORK.__dict__, "divides_data": True, "compute_s": {1: (0.02,), 2: (0.012,)}})
    assert list(divided.samples(concurrent=1, workers=1)) == [0.02]
    assert list(divided.samples(concurrent=2, workers=8)) == [pytest.approx(0.012 * 2 / 8)]
    assert divided.env_steps(workers=8) == 8


def test_calibration_round_trips_and_a_bad_file_names_the_flag(tmp_path):
    calibration = Calibration(cpus=2, transport="shm", latency_s=1e-4, bandwidth_Bps=1e9,
                              apply_points={"sgd": [[1000, 1e-5], [10_000, 2e-5]]}, workloads={"lstsq": WORK})
    path = calibration.save(tmp_path / "c.json")
    loaded = Calibration.load(path)
    assert loaded == calibration
    # between the measured sizes on a line, beyond the largest in proportion, below the smallest as it
    assert loaded.apply_s("sgd", 5500) == pytest.approx(1.5e-5)
    assert loaded.apply_s("sgd", 20_000) == pytest.approx(4e-5)
    assert loaded.apply_s("sgd", 10) == pytest.approx(1e-5)
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ConfigError) as err:
        Calibration.load(tmp_path / "bad.json")
    assert err.value.flag == "--calibration"
    with pytest.raises(ConfigError, match="a3c"):
        loaded.workload("a3c")
    assert math.isfinite(loaded.latency_s)
