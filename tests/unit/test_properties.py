"""Properties that must hold for every input (hypothesis): the update rule, the shard layout, the
replay ring."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gorila.params import ParameterShard, ShardLayout, UpdateRule
from gorila.replay import TransitionStorage
from gorila.types import Transitions

rules = st.builds(
    lambda aggregate, count, extra: UpdateRule(aggregate=aggregate, count_within=count, accept_within=count + extra),
    st.integers(1, 5), st.integers(0, 4), st.integers(0, 4))


@given(rule=rules, staleness=st.lists(st.integers(0, 12), min_size=1, max_size=60))
@settings(max_examples=200, deadline=None)
def test_a_shard_updates_once_per_aggregate_counted_pushes_and_classifies_by_staleness(rule, staleness):
    shard = ParameterShard(np.zeros(3, np.float32), rule, "sgd", lr=0.1)
    counted = 0
    for s in staleness:
        label = max(shard.version - s, 0)
        true = shard.version - label  # the seed's table: counted, accepted, rejected by staleness
        expected = ("counted" if true <= rule.count_within else "accepted" if true <= rule.accept_within
                    else "rejected")
        assert shard.push(np.ones(3, np.float32), label).outcome == expected
        counted += expected == "counted"
    assert shard.version == counted // rule.aggregate
    stats = shard.stats
    assert stats.pushes_counted + stats.pushes_accepted + stats.pushes_rejected == len(staleness)
    assert sum(stats.staleness.values()) == len(staleness)


@given(staleness=st.integers(0, 100), rule=rules)
def test_classification_is_monotone_in_staleness(staleness, rule):
    order = {"counted": 0, "accepted": 1, "rejected": 2}
    assert order[rule.classify(staleness)] <= order[rule.classify(staleness + 1)]


@given(size=st.integers(1, 10_000), shards=st.integers(1, 64))
def test_a_layout_cuts_the_vector_into_contiguous_near_equal_slices(size, shards):
    if shards > size:
        return
    slices = ShardLayout(size, shards).slices
    assert slices[0].start == 0 and slices[-1].stop == size
    assert all(a.stop == b.start for a, b in zip(slices, slices[1:]))
    lengths = [s.stop - s.start for s in slices]
    assert max(lengths) - min(lengths) <= 1


@given(capacity=st.integers(1, 50), batches=st.lists(st.integers(1, 30), min_size=1, max_size=12))
def test_the_replay_ring_keeps_exactly_the_newest_capacity_transitions(capacity, batches):
    storage = TransitionStorage(capacity, (1,), np.float32)
    added = 0
    for n in batches:
        index = np.arange(added, added + n, dtype=np.float32)[:, None]  # obs = the row's number
        storage.add(Transitions(index, np.zeros(n, np.int64), np.zeros(n, np.float32), index + 1, np.zeros(n, bool),
                                np.zeros(n, bool), np.zeros(n, np.int64), discount=np.ones(n, np.float32),
                                steps=np.ones(n, np.int64)))
        added += n
    assert len(storage) == min(added, capacity)
    held = {float(x) for x in storage.state_dict()["obs"][: len(storage), 0]}
    assert held == set(map(float, range(added - len(storage), added)))
