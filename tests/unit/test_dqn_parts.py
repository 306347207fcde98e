"""The parts of Gorila DQN as plain objects: exploration, the target network, the outlier filter,
and the learner's gradient."""

import numpy as np
import pytest
import torch

from gorila.actors import ExplorationSchedule
from gorila.actors.exploration import epsilon_greedy
from gorila.errors import ConfigError
from gorila.learners.q_learner import OutlierFilter, QLearner
from gorila.learners.target import TargetUpdate
from gorila.losses.dqn import dqn_loss
from gorila.nets import FlatParams
from gorila.nets.q import VectorQNetwork
from gorila.types import Batch


def network():
    torch.manual_seed(0)
    return VectorQNetwork(3, (8,), 2)


def learner(**kwargs):
    options = dict(loss="mse", target="double", target_update=TargetUpdate.hard(3), outlier_k=None,
                   max_grad_norm=None)
    return QLearner(network, **{**options, **kwargs})


def batch(seed=0, n=16):
    rng = np.random.default_rng(seed)
    return Batch(rng.standard_normal((n, 3)).astype(np.float32), rng.integers(0, 2, n),
                 rng.standard_normal(n).astype(np.float32), rng.standard_normal((n, 3)).astype(np.float32),
                 np.where(rng.random(n) < 0.2, 0.0, 0.9).astype(np.float32), np.arange(n),
                 rng.uniform(0.2, 1.0, n).astype(np.float32), np.zeros(n, np.int64))


# --- exploration -------------------------------------------------------------------------------

def test_epsilon_is_annealed_by_global_updates_the_same_for_every_actor():
    schedule = ExplorationSchedule.annealed(start=1.0, end=0.1, over_updates=100)
    assert [schedule.epsilon(0, u) for u in (0, 50, 100, 1000)] == pytest.approx([1.0, 0.55, 0.1, 0.1])
    assert schedule.epsilon(0, 50) == schedule.epsilon(7, 50)  # by the server's version, not the actor's steps


def test_apex_gives_each_actor_its_own_fixed_epsilon():
    schedule = ExplorationSchedule.per_actor(num_actors=8, alpha=7.0)
    eps = [schedule.epsilon(i, 0) for i in range(8)]
    assert eps[0] == pytest.approx(0.4) and eps[7] == pytest.approx(0.4 ** 8)
    assert eps == sorted(eps, reverse=True)
    assert all(schedule.epsilon(i, 10**6) == eps[i] for i in range(8))  # never annealed
    assert ExplorationSchedule.per_actor(num_actors=1).epsilon(0, 0) == pytest.approx(0.4)


def test_a_bad_schedule_names_its_flag():
    with pytest.raises(ConfigError, match="eps_start"):
        ExplorationSchedule.annealed(start=1.5, end=0.1, over_updates=10)


def test_epsilon_greedy_replaces_a_fraction_epsilon_of_actions_by_uniform_ones():
    rng, n_actions, rows = np.random.default_rng(0), 3, 60_000
    greedy = np.full(rows, n_actions, np.int64)  # no real action: every replaced row shows
    assert epsilon_greedy(greedy.copy(), 0.0, n_actions, rng).tolist() == greedy.tolist()
    acted = epsilon_greedy(greedy.copy(), 0.25, n_actions, rng)
    explored = acted[acted != n_actions]
    assert len(explored) / rows == pytest.approx(0.25, abs=0.01)
    assert np.bincount(explored, minlength=n_actions) / len(explored) == pytest.approx([1 / 3] * 3, abs=0.01)
    every = epsilon_greedy(greedy.copy(), 1.0, n_actions, rng)
    assert every.min() == 0 and every.max() == n_actions - 1


# --- target network ------------------------------------------------------------------------------

def test_a_hard_target_is_refreshed_every_n_global_updates_whatever_this_learner_pushed():
    update = TargetUpdate.parse("hard:3")
    params = {v: np.full(2, float(v), np.float32) for v in range(10)}
    started = update.follow(None, -1, params[0], 0)  # starts at the first parameters it sees
    assert started is not None
    target, version = started
    seen = []
    for v in (1, 2, 4, 5, 6, 9):  # the versions this learner happens to compute on
        moved = update.follow(target, version, params[v], v)
        if moved is not None:
            target, version = moved
            seen.append(v)
    assert seen == [4, 9]  # refreshed once 3 global updates passed since the last refresh
    assert np.array_equal(target, params[9])


def test_a_soft_target_moves_by_tau_once_per_new_version():
    update = TargetUpdate.soft(0.25)
    started = update.follow(None, -1, np.zeros(2, np.float32), 0)
    assert started is not None
    moved = update.follow(*started, np.full(2, 4.0, np.float32), 1)
    assert moved is not None
    target, version = moved
    np.testing.assert_allclose(target, [1.0, 1.0])
    assert update.follow(target, version, np.full(2, 4.0, np.float32), 1) is None  # same version: stays


@pytest.mark.parametrize("text", ["hard:0", "hard:1.5", "soft:0", "soft:2", "every:3", "hard"])
def test_a_bad_target_update_names_its_flag(text):
    with pytest.raises(ConfigError, match="target_update"):
        TargetUpdate.parse(text)


def test_the_learner_computes_against_the_target_it_refreshed_on_the_global_version():
    q = learner(target_update=TargetUpdate.hard(2))
    w0 = FlatParams(network()).get()
    w1 = w0 + 0.5
    q.gradient(w0, 0, batch())
    q.gradient(w1, 1, batch())
    np.testing.assert_array_equal(q.target_flat.get(), w0)  # one global update: not yet
    q.gradient(w1, 2, batch())
    np.testing.assert_array_equal(q.target_flat.get(), w1)  # two: the target follows


@pytest.mark.parametrize("target", ["double", "max"])
def test_the_pushed_gradient_is_that_of_the_chosen_target(target):
    q = learner(target=target)
    params = FlatParams(network()).get()
    grad, info = q.gradient(params, 0, batch())
    online, frozen = network(), network()
    loss, _ = dqn_loss(online, frozen, batch(), "mse", target)
    loss.backward()
    np.testing.assert_allclose(grad, np.concatenate([p.grad.numpy().ravel() for p in online.parameters()]),
                               rtol=1e-5, atol=1e-7)
    assert info["loss"] == pytest.approx(loss.item())


def test_double_q_values_the_online_choice_where_max_q_takes_the_targets_best():
    online, target = network(), network()
    with torch.no_grad():  # constant Q-values: online prefers action 1, the target values action 0 at 10
        for net, values in ((online, [0.0, 1.0]), (target, [10.0, 2.0])):
            for p in net.parameters():
                p.zero_()
            list(net.parameters())[-1].copy_(torch.tensor(values))
    b = batch()._replace(discount=np.full(16, 0.9, np.float32))
    targets = {kind: dqn_loss(online, target, b, "mse", kind)[1]["target_mean"] for kind in ("double", "max")}
    assert targets["double"] == pytest.approx(float(b.reward.mean()) + 0.9 * 2.0, rel=1e-5)
    assert targets["max"] == pytest.approx(float(b.reward.mean()) + 0.9 * 10.0, rel=1e-5)


# --- outlier filter -------------------------------------------------------------------------------

def test_a_loss_beyond_mean_plus_k_std_is_an_outlier_and_stays_out_of_the_statistics():
    filt = OutlierFilter(k=3.0, window=100, warmup=20)
    losses = [1.0 + 0.1 * (i % 5) for i in range(30)]
    assert not any(filt.is_outlier(x) for x in losses)
    before = list(filt.losses)
    assert filt.is_outlier(50.0)
    assert list(filt.losses) == before  # the outlier does not widen the band for the next one
    assert filt.is_outlier(50.0)


def test_nothing_is_an_outlier_during_warmup_or_without_k():
    warming = OutlierFilter(k=1.0, warmup=20)
    assert not any(warming.is_outlier(x) for x in [1.0] * 19 + [1e6])
    assert not any(OutlierFilter(k=None).is_outlier(x) for x in [1.0] * 50 + [1e9])


def test_the_learner_skips_an_outlier_batch_and_counts_it():
    q = learner(outlier_k=3.0)
    params = FlatParams(network()).get()
    for _ in range(25):  # the same parameters and batch: the same loss every time
        assert q.gradient(params, 0, batch())[0] is not None
    big = batch(99)
    big = big._replace(reward=big.reward * 1e4)
    grad, info = q.gradient(params, 0, big)
    assert grad is None and q.skipped_outliers == 1 and info["loss"] > 1e6
