"""The update rule and the shard's handling of each push, table by table (docs/algorithms.md, the update rules)."""

import math

import numpy as np
import pytest

from gorila.config import RunConfig
from gorila.errors import ConfigError, GradientError, VersionError
from gorila.params import ParameterShard, UpdateRule

D = 3


def shard_at_version(rule, version, lr=0.1, optimizer="sgd"):
    """A shard advanced to ``version`` by counted pushes of zero gradients."""
    shard = ParameterShard(np.zeros(D, np.float32), rule=rule, optimizer=optimizer, lr=lr)
    while shard.version < version:
        shard.push(np.zeros(D, np.float32), version=shard.version)
    return shard


@pytest.mark.parametrize("staleness, outcome", [(0, "counted"), (3, "counted"), (4, "accepted"),
                                                 (5, "accepted"), (6, "rejected"), (50, "rejected")])
def test_seed_002_classification(staleness, outcome):
    assert UpdateRule.semi_async().classify(staleness) == outcome


def test_semi_async_defaults_are_seed_002():
    rule = UpdateRule.semi_async()
    assert (rule.aggregate, rule.count_within, rule.accept_within, rule.barrier) == (20, 3, 5, False)


def test_semi_async_applies_mean_after_twenty_counted_pushes_and_accepted_ones_join():
    rule = UpdateRule.semi_async()
    shard = shard_at_version(rule, 6)  # 6 * 20 zero pushes
    base = shard.pull()[0]
    grads: list[float] = []
    for i in range(19):
        result = shard.push(np.full(D, i, np.float32), version=6 - (i % 4), worker_id=i)  # staleness 0..3
        assert (result.outcome, result.applied) == ("counted", False)
        grads.append(i)
    accepted = shard.push(np.full(D, 100.0, np.float32), version=1)  # staleness 5
    assert (accepted.outcome, accepted.applied) == ("accepted", False)
    assert accepted.params is not None and accepted.version == 6  # behind: fresh params in the reply
    grads.append(100.0)
    last = shard.push(np.full(D, 7.0, np.float32), version=6)
    grads.append(7.0)
    assert (last.outcome, last.applied, last.version) == ("counted", True, 7)
    expected = base - np.float32(0.1) * np.float32(np.mean(grads))
    np.testing.assert_allclose(shard.pull()[0], expected, rtol=1e-6)


def test_semi_async_rejects_staleness_over_five_with_fresh_params_and_no_change():
    shard = shard_at_version(UpdateRule.semi_async(), 6)
    before = shard.state_dict()
    result = shard.push(np.ones(D, np.float32), version=0)
    assert (result.outcome, result.reason, result.applied, result.version) == ("rejected", "stale", False, 6)
    np.testing.assert_array_equal(result.params, before["params"])
    after = shard.state_dict()
    for key in ("params", "pending", "counters") + tuple(k for k in before if k.startswith("optim.")):
        np.testing.assert_array_equal(after[key], before[key])
    assert shard.stats.pushes_rejected_stale == 1


@pytest.mark.parametrize("max_staleness, staleness, outcome", [
    (None, 0, "counted"), (None, 1000, "counted"), (2, 2, "counted"), (2, 3, "rejected")])
def test_asynchronous(max_staleness, staleness, outcome):
    rule = UpdateRule.asynchronous(max_staleness)
    shard = shard_at_version(rule, staleness)
    result = shard.push(np.ones(D, np.float32), version=0)
    assert result.outcome == outcome
    assert result.applied == (outcome == "counted")
    assert result.version == staleness + result.applied
    assert result.params is not None  # the pusher is behind either way


def test_asynchronous_applies_each_push_at_once():
    shard = ParameterShard(np.zeros(D, np.float32), rule=UpdateRule.asynchronous(), lr=0.5)
    for k in range(3):
        assert shard.push(np.ones(D, np.float32), version=k).applied
    np.testing.assert_allclose(shard.pull()[0], -1.5)
    assert shard.version == 3


def test_synchronous_is_gradient_descent_on_the_mean():
    rule = UpdateRule.synchronous(num_workers=3)
    assert (rule.aggregate, rule.count_within, rule.accept_within, rule.barrier) == (3, 0, 0, True)
    shard = ParameterShard(np.ones(D, np.float32), rule=rule, lr=0.1)
    outs = [shard.push(np.full(D, g, np.float32), version=0, worker_id=g) for g in (1, 2, 6)]
    assert [o.applied for o in outs] == [False, False, True]
    np.testing.assert_allclose(shard.pull()[0], 1.0 - 0.1 * 3.0)
    late = shard.push(np.ones(D, np.float32), version=0)  # a gradient of the previous version
    assert late.outcome == "rejected"


def test_nonfinite_gradient_is_rejected_and_changes_nothing():
    shard = ParameterShard(np.ones(D, np.float32), rule=UpdateRule.semi_async(aggregate=2), optimizer="adam", lr=0.1)
    shard.push(np.ones(D, np.float32), version=0)  # something pending
    before = shard.state_dict()
    for bad in (np.nan, np.inf, -np.inf):
        g = np.ones(D, np.float32)
        g[1] = bad
        result = shard.push(g, version=0)
        assert (result.outcome, result.reason, result.applied) == ("rejected", "nonfinite", False)
    after = shard.state_dict()
    for key in before:
        if key not in ("stats", "staleness"):
            assert after[key].tobytes() == before[key].tobytes(), key
    assert shard.stats.pushes_rejected_nonfinite == 3


@pytest.mark.parametrize("grad, match", [
    (np.ones(D + 1, np.float32), r"expected float32 of shape \(3,\), got float32 of shape \(4,\)"),
    (np.ones(D, np.float64), r"expected float32 of shape \(3,\), got float64 of shape \(3,\)"),
    ([1.0, 2.0, 3.0], "got list")])
def test_wrong_gradient_raises_naming_expected_and_received(grad, match):
    shard = ParameterShard(np.zeros(D, np.float32), rule=UpdateRule.asynchronous())
    with pytest.raises(GradientError, match=match):
        shard.push(grad, version=0)


def test_version_from_the_future_is_an_error():
    shard = ParameterShard(np.zeros(D, np.float32), rule=UpdateRule.asynchronous())
    with pytest.raises(VersionError, match="from the future"):
        shard.push(np.zeros(D, np.float32), version=1)


@pytest.mark.parametrize("kwargs, field", [
    (dict(aggregate=0, count_within=0, accept_within=0), "aggregate"),
    (dict(aggregate=2, count_within=5, accept_within=3), "accept_within"),
    (dict(aggregate=2, count_within=-1, accept_within=3), "count_within"),
    (dict(aggregate=2, count_within=1.5, accept_within=3), "count_within")])
def test_invalid_rules_name_the_field(kwargs, field):
    with pytest.raises(ConfigError) as err:
        UpdateRule(**kwargs)
    assert err.value.field == field


def test_the_semi_async_client_blocks_unless_the_pipelining_variant_is_named():
    assert not UpdateRule.for_mode("semi-async", 2).pipelined
    assert UpdateRule.for_mode("semi-async", 2, client="blocks") == UpdateRule.semi_async()
    assert UpdateRule.for_mode("semi-async", 2, client="pipelines") == UpdateRule.semi_async(pipelined=True)
    assert not RunConfig(mode="semi-async").rule(2).pipelined
    assert RunConfig(mode="semi-async", semi_async_client="pipelines").rule(2).pipelined
    for mode in ("sync", "async"):
        with pytest.raises(ConfigError, match="semi-async only") as err:
            RunConfig(mode=mode, semi_async_client="pipelines")
        assert err.value.field == "semi_async_client"
    with pytest.raises(ConfigError) as err:
        UpdateRule(aggregate=2, count_within=0, accept_within=0, barrier=True, pipelined=True)
    assert err.value.field == "pipelined"


def test_staleness_histogram_and_bytes_are_counted():
    shard = shard_at_version(UpdateRule.asynchronous(), 2)
    shard.stats.bytes_in = shard.stats.bytes_out = 0
    shard.push(np.ones(D, np.float32), version=0)
    shard.pull()
    assert shard.stats.staleness[2] == 1
    assert shard.stats.bytes_in == D * 4
    assert shard.stats.bytes_out == 2 * D * 4  # fresh params in the reply, then the pull


def test_state_dict_round_trip_continues_identically():
    a = ParameterShard(np.arange(D, dtype=np.float32), rule=UpdateRule.semi_async(aggregate=2), optimizer="rmsprop",
                       lr=0.01)
    for v in range(3):
        a.push(np.full(D, v + 1.0, np.float32), version=a.version)
    b = ParameterShard(np.zeros(D, np.float32), rule=a.rule, optimizer="rmsprop", lr=0.01)
    b.load_state_dict(a.state_dict())
    assert b.stats.as_dict() == a.stats.as_dict()
    for shard in (a, b):
        shard.push(np.full(D, 2.0, np.float32), version=shard.version)
    assert a.pull()[0].tobytes() == b.pull()[0].tobytes()
    assert a.version == b.version == 2


def test_asynchronous_unbounded_is_infinite():
    assert math.isinf(UpdateRule.asynchronous().accept_within)


def test_a_sweep_gives_each_mode_only_its_own_knobs():
    knobs = {"max_staleness": 2, "aggregate": 10}
    assert UpdateRule.for_mode_knobs("async", 4, knobs) == UpdateRule.asynchronous(max_staleness=2)
    assert UpdateRule.for_mode_knobs("semi-async", 4, knobs) == UpdateRule.semi_async(aggregate=10)
    assert UpdateRule.for_mode_knobs("sync", 4, knobs) == UpdateRule.synchronous(num_workers=4)
    with pytest.raises(ConfigError) as err:
        UpdateRule.for_mode_knobs("hogwild", 4, knobs)
    assert err.value.field == "mode"


def test_the_workers_placement_is_refused_naming_what_replaced_it():
    for mode in ("sync", "async"):
        with pytest.raises(ConfigError, match="--server process --mode sync") as err:
            RunConfig(mode=mode, server="workers")
        assert err.value.field == "server" and "--server learner --learners N" in str(err.value)
