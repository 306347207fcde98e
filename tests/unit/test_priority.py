"""Proportional prioritized sampling: frequencies, importance weights, removals, and the trees."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gorila.replay import PrioritizedSampler

CHI2_7_DOF_P01 = 18.475  # the chi-square distribution's 99th percentile with 7 degrees of freedom


def test_slots_are_drawn_in_proportion_to_priority_to_the_alpha():
    sampler = PrioritizedSampler(capacity=1024, alpha=0.6)
    priorities = np.linspace(0.1, 5.0, 8)
    sampler.update(np.arange(8) * 100, priorities)   # slots spread over the tree
    rng = np.random.default_rng(0)
    drawn = np.concatenate([sampler.sample(64, beta=0.4, rng=rng)[0] for _ in range(2000)])
    counts = np.array([(drawn == i * 100).sum() for i in range(8)])
    assert counts.sum() == len(drawn)  # nothing but the present slots is ever drawn
    expected = priorities ** 0.6 / (priorities ** 0.6).sum() * len(drawn)
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < CHI2_7_DOF_P01, (counts, expected.round())


def test_importance_weights_are_normalised_by_the_largest_possible_weight():
    sampler = PrioritizedSampler(capacity=16, alpha=1.0)
    sampler.update(np.array([0, 1, 2, 3]), np.array([1.0, 2.0, 3.0, 4.0]))
    indices, weights = sampler.sample(200, beta=0.5, rng=np.random.default_rng(1))
    p = np.array([1.0, 2.0, 3.0, 4.0]) / 10.0
    raw = (4 * p) ** -0.5
    np.testing.assert_allclose(weights, raw[indices] / raw.max(), rtol=1e-6)
    assert weights.max() <= 1.0 and weights.dtype == np.float32
    assert sampler.sample(50, beta=0.0, rng=np.random.default_rng(2))[1].tolist() == [1.0] * 50


def test_a_slot_set_to_zero_is_never_drawn_again_and_leaves_the_count():
    sampler = PrioritizedSampler(capacity=8, alpha=0.6)
    sampler.update(np.arange(8), np.ones(8))
    sampler.update(np.array([3, 5]), np.zeros(2))
    assert len(sampler) == 6
    drawn = sampler.sample(4000, beta=1.0, rng=np.random.default_rng(3))[0]
    assert not np.isin(drawn, [3, 5]).any()


def test_the_last_of_a_repeated_index_wins():
    sampler = PrioritizedSampler(capacity=4, alpha=1.0)
    sampler.update(np.array([2, 2, 2]), np.array([5.0, 0.0, 7.0]))
    assert sampler.priorities(np.array([2]))[0] == 7.0 and len(sampler) == 1


def test_bad_input_is_refused():
    sampler = PrioritizedSampler(capacity=4)
    with pytest.raises(IndexError):
        sampler.update(np.array([4]), np.array([1.0]))
    with pytest.raises(ValueError):
        sampler.update(np.array([0]), np.array([np.nan]))
    with pytest.raises(ValueError, match="no slot"):
        sampler.sample(1, beta=0.4, rng=np.random.default_rng(0))


@given(capacity=st.integers(1, 300),
       updates=st.lists(st.tuples(st.integers(0, 299), st.floats(0, 100, allow_nan=False)), min_size=1,
                        max_size=80))
@settings(max_examples=150, deadline=None)
def test_the_trees_hold_the_sum_and_minimum_of_the_leaves(capacity, updates):
    sampler = PrioritizedSampler(capacity, alpha=0.7)
    leaves = np.zeros(capacity)
    for index, priority in updates:
        index %= capacity
        sampler.update(np.array([index]), np.array([priority]))
        leaves[index] = priority
    scaled = np.where(leaves > 0, leaves ** 0.7, 0.0)
    assert sampler.total == pytest.approx(scaled.sum(), rel=1e-9, abs=1e-12)
    assert len(sampler) == int((leaves > 0).sum())
    present = scaled[leaves > 0]
    assert sampler._min.root == (present.min() if len(present) else np.inf)
    if len(present):  # every draw is a present slot
        drawn = sampler.sample(64, beta=0.4, rng=np.random.default_rng(0))[0]
        assert (leaves[drawn] > 0).all()
