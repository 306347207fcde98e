"""IMPALA's loss on segments and its learner against an in-process queue and server."""

import functools

import numpy as np
import pytest
import torch

from gorila.agents.impala.config import ImpalaConfig
from gorila.agents.impala.learner import ImpalaLearner
from gorila.agents.impala.loss import ImpalaLoss
from gorila.errors import ConfigError, WorkerTimeoutError
from gorila.nets.actor_critic_env import make_network
from gorila.nets.flat import FlatParams
from gorila.params import LocalEndpoint, ParameterServer, ServerSpec, UpdateRule
from gorila.runtime.local import LocalService
from gorila.trajectory import RemoteQueue, TrajectoryQueue
from gorila.types import Segment

COUNTING = "gorila/Counting-v0"
network_fn = functools.partial(make_network, COUNTING, (8,), False, 0)


def _segment(net, T=4, N=3, seed=0, behaviour_shift=0.0, version=0):
    g = np.random.default_rng(seed)
    obs = g.normal(size=(T, N, 1)).astype(np.float32)
    actions = g.integers(2, size=(T, N))
    with torch.no_grad():
        logits, _ = net(torch.as_tensor(obs))
    log_pi = torch.log_softmax(logits, -1).gather(-1, torch.as_tensor(actions).unsqueeze(-1)).squeeze(-1).numpy()
    return Segment(obs=obs, actions=actions, rewards=g.normal(size=(T, N)).astype(np.float32),
                   discounts=np.full((T, N), 0.9, np.float32), truncated=np.zeros((T, N), bool),
                   final_obs=np.zeros((0, 1), np.float32), valid=np.ones((T, N), bool),
                   log_probs=(log_pi + behaviour_shift).astype(np.float32),
                   policy_version=np.full((T, N), version, np.int64), last_obs=g.normal(size=(N, 1)).astype(np.float32))


def _grad(loss, seg):
    net = network_fn()
    return loss.gradients(net, seg, FlatParams(net))


def test_on_policy_data_gives_the_same_gradient_with_and_without_vtrace():
    seg = _segment(network_fn())
    on, info = _grad(ImpalaLoss(), seg)
    off, _ = _grad(ImpalaLoss(vtrace=False), seg)
    np.testing.assert_allclose(on, off, rtol=1e-5, atol=1e-7)
    assert info["rho_mean"] == pytest.approx(1.0)


def test_off_policy_data_is_reweighted_only_with_vtrace():
    seg = _segment(network_fn(), behaviour_shift=1.0)  # mu's log-probs 1 above pi's: rho = e^-1
    on, info = _grad(ImpalaLoss(), seg)
    off, _ = _grad(ImpalaLoss(vtrace=False), seg)
    assert info["rho_mean"] == pytest.approx(np.exp(-1.0), rel=1e-4)
    assert not np.allclose(on, off)


def test_the_value_target_of_a_segment_s_last_step_bootstraps_from_the_observation_after_it():
    """One step, on-policy: the value target is r + discount * V(last_obs), so the value loss is
    1/2 mean((r + 0.9 V(last_obs) - V(obs))^2)."""
    net = network_fn()
    seg = _segment(net, T=1, N=5, seed=3)
    _, info = ImpalaLoss().gradients(net, seg, FlatParams(net))
    with torch.no_grad():
        value = net(torch.as_tensor(seg.obs[0]))[1].numpy()
        after = net(torch.as_tensor(seg.last_obs))[1].numpy()
    target = seg.rewards[0] + 0.9 * after
    assert info["value_loss"] == pytest.approx(0.5 * np.mean((target - value) ** 2), rel=1e-5)


def test_a_truncated_step_bootstraps_from_where_the_episode_was_cut_and_a_terminated_one_from_nothing():
    net = network_fn()
    base = _segment(net, T=1, N=1)
    cut_at = np.array([[1.7]], np.float32)
    with torch.no_grad():
        v = net(torch.as_tensor(base.obs[0]))[1].item()
        v_final = net(torch.as_tensor(cut_at))[1].item()
    r = float(base.rewards[0, 0])
    truncated = Segment(**{**base.__dict__, "truncated": np.ones((1, 1), bool), "final_obs": cut_at})
    terminated = Segment(**{**base.__dict__, "discounts": np.zeros((1, 1), np.float32)})
    _, info = _grad(ImpalaLoss(), truncated)
    assert info["value_loss"] == pytest.approx(0.5 * (r + 0.9 * v_final - v) ** 2, rel=1e-4)
    _, info = _grad(ImpalaLoss(), terminated)
    assert info["value_loss"] == pytest.approx(0.5 * (r - v) ** 2, rel=1e-4)


def test_invalid_slots_join_no_loss_term():
    seg = _segment(network_fn(), seed=3)
    valid = seg.valid.copy()
    valid[:, 1] = False  # a failed env
    masked = Segment(**{**seg.__dict__, "valid": valid})
    scrambled = Segment(**{**masked.__dict__, "obs": np.where(valid[..., None], seg.obs, 7).astype(np.float32),
                           "rewards": np.where(valid, seg.rewards, 100).astype(np.float32)})
    np.testing.assert_allclose(_grad(ImpalaLoss(), masked)[0], _grad(ImpalaLoss(), scrambled)[0], rtol=1e-5, atol=1e-7)
    assert not np.allclose(_grad(ImpalaLoss(), masked)[0], _grad(ImpalaLoss(), seg)[0])


def test_rho_bar_below_c_bar_is_refused_naming_c_bar():
    with pytest.raises(ConfigError) as refused:
        ImpalaConfig(rho_bar=0.5, c_bar=1.0)
    assert refused.value.field == "c_bar"
    ImpalaConfig(rho_bar=2.0, c_bar=1.0)


def _learner(queue, batch_size=2, timeout_s=30.0):
    params = FlatParams(network_fn()).get()
    spec = ServerSpec(rule=UpdateRule.asynchronous(), optimizer="sgd", lr=0.1)
    shards = spec.build(params)
    server = ParameterServer(tuple(LocalEndpoint(s) for s in shards), spec.layout(params.size), spec.rule,
                             timeout_s=timeout_s)
    return ImpalaLearner(0, server, network_fn=network_fn, loss=ImpalaLoss(), queues=[RemoteQueue(LocalService(queue))],
                         batch_size=batch_size), shards


def test_the_learner_pushes_once_it_holds_a_batch_and_counts_the_policy_lag(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr("gorila.learners.segment_learner.time.monotonic", lambda: clock[0])
    queue = TrajectoryQueue(0, capacity=8)
    learner, shards = _learner(queue, timeout_s=5.0)
    assert not learner.step()  # empty: blocked
    queue.add(_segment(network_fn(), version=0), "a", 0)
    assert learner.step() and learner.pushes == 0  # one of two held
    queue.add(_segment(network_fn(), version=0), "a", 1)
    queue.add(_segment(network_fn(), version=0), "a", 2)
    queue.add(_segment(network_fn(), version=0), "a", 3)
    assert learner.step() and learner.pushes == 1 and shards[0].version == 1
    assert learner.step() and learner.pushes == 2
    report = learner.report()
    # 2 segments of 4 x 3 steps each; the second batch was learnt at version 1
    assert report["policy_lag"] == {0: 24, 1: 24}
    assert report["policy_lag_mean"] == pytest.approx(0.5)
    assert not learner.step()
    clock[0] = 5.5
    with pytest.raises(WorkerTimeoutError, match="queue 0 stayed empty"):
        learner.step()



@pytest.mark.parametrize("flag, expected", [("on", True), ("off", False)])
def test_the_builder_hands_the_learners_the_vtrace_switch_and_the_actors_their_refresh(flag, expected):
    from gorila.agents.impala.builder import make_plan
    from gorila.agents.rl_config import RLConfig
    from gorila.config import RunConfig

    plan = make_plan(RunConfig(algo="impala", runtime="local"), ImpalaConfig(vtrace=flag, actor_refresh=7),
                     RLConfig(env=COUNTING))
    actors, learners = plan.groups({"trajectories": [LocalService(TrajectoryQueue(0, capacity=2))]})
    assert isinstance(learners.factory, functools.partial) and isinstance(actors.factory, functools.partial)
    assert learners.factory.keywords["loss"].vtrace is expected
    assert actors.factory.keywords["refresh_every"] == 7
