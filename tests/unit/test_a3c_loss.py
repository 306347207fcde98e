import dataclasses
import math

import numpy as np
import pytest
import torch

from gorila.agents.a3c.config import A3CConfig
from gorila.agents.a3c.loss import Rollout, a3c_gradients, a3c_loss, n_step_returns, rollout_targets
from gorila.errors import ConfigError
from gorila.nets import FlatParams, soft_update
from gorila.nets.actor_critic import ActorCritic

GAMMA = 0.9
ENTROPY_COEF = 0.05


# --- n-step returns -------------------------------------------------------------------------

def test_n_step_returns_by_hand_with_an_episode_end_in_the_middle():
    rewards = torch.tensor([[1.0, 1.0], [2.0, 1.0], [3.0, 1.0]])
    dones = torch.tensor([[False, False], [True, False], [False, False]])
    bootstrap = torch.tensor([10.0, 4.0])
    returns = n_step_returns(rewards, dones, bootstrap, gamma=0.5)
    # env 0: y2 = 3 + .5*10 = 8; the episode ends at t=1 so y1 = 2, y0 = 1 + .5*2 = 2
    # env 1: y2 = 1 + .5*4 = 3, y1 = 1 + .5*3 = 2.5, y0 = 1 + .5*2.5 = 2.25
    assert returns.tolist() == [[2.0, 2.25], [2.0, 2.5], [8.0, 3.0]]


def test_n_step_returns_bootstrap_where_an_episode_was_truncated():
    rewards = torch.tensor([[1.0], [2.0], [3.0]])
    dones = torch.tensor([[False], [True], [False]])
    at_truncation = torch.tensor([[99.0], [6.0], [99.0]])  # read only where dones is true
    returns = n_step_returns(rewards, dones, torch.tensor([10.0]), 0.5, at_truncation)
    # y1 = 2 + .5*6 = 5, y0 = 1 + .5*5 = 3.5; y2 unaffected
    assert returns[:, 0].tolist() == [3.5, 5.0, 8.0]


def test_lambda_return_by_hand():
    rewards = torch.tensor([[1.0], [2.0], [3.0]])
    dones = torch.tensor([[False], [True], [False]])
    next_values = torch.tensor([[4.0], [99.0], [10.0]])  # t=1 ended: its next value is never read
    returns = n_step_returns(rewards, dones, torch.tensor([10.0]), 0.5, next_values=next_values, lam=0.5)
    # y2 = 3 + .5*10 = 8 (the bootstrap); y1 = 2 (terminated); y0 = 1 + .5*(.5*4 + .5*2) = 2.5
    assert returns[:, 0].tolist() == [2.5, 2.0, 8.0]


def test_lambda_zero_is_the_one_step_target_and_lambda_one_the_n_step_target():
    g = torch.Generator().manual_seed(0)
    rewards, next_values = torch.randn(5, 3, generator=g), torch.randn(5, 3, generator=g)
    dones = torch.zeros(5, 3, dtype=torch.bool)
    bootstrap = next_values[-1]
    one_step = n_step_returns(rewards, dones, bootstrap, 0.9, next_values=next_values, lam=0.0)
    torch.testing.assert_close(one_step, rewards + 0.9 * next_values)
    assert torch.equal(n_step_returns(rewards, dones, bootstrap, 0.9, next_values=next_values, lam=1.0),
                       n_step_returns(rewards, dones, bootstrap, 0.9))


def test_lambda_return_needs_next_values():
    with pytest.raises(ValueError, match="next_values"):
        n_step_returns(torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(2), 0.9, lam=0.95)


def test_n_step_returns_reject_mismatched_shapes():
    with pytest.raises(ValueError, match="bootstrap_value"):
        n_step_returns(torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3), 0.9)


# --- the pushed gradient is the textbook gradient ------------------------------------------

def _rollout(obs_dim: int, n_actions: int) -> Rollout:
    g = torch.Generator().manual_seed(3)
    T, N = 4, 2
    dones = torch.zeros(T, N, dtype=torch.bool)
    truncated = torch.zeros(T, N, dtype=torch.bool)
    dones[1, 0] = True                        # env 0 terminates at t=1
    dones[2, 1] = truncated[2, 1] = True      # env 1 hits a time limit at t=2
    return Rollout(obs=torch.randn(T, N, obs_dim, generator=g),
                   actions=torch.randint(0, n_actions, (T, N), generator=g),
                   rewards=torch.randn(T, N, generator=g),
                   dones=dones,
                   last_obs=torch.randn(N, obs_dim, generator=g),
                   truncated=truncated,
                   final_obs=torch.randn(T, N, obs_dim, generator=g))


def _textbook_target(target_net, r: Rollout, t: int, n: int) -> float:
    """y_t from its definition: discounted rewards to the episode or rollout end, then bootstrap."""
    y, discount = 0.0, 1.0
    for k in range(t, r.rewards.shape[0]):
        y += discount * float(r.rewards[k, n])
        discount *= GAMMA
        if r.dones[k, n]:
            if r.truncated is not None and r.truncated[k, n]:  # without it, every end is a termination
                assert r.final_obs is not None
                y += discount * float(target_net(r.final_obs[k, n])[1])
            return y
    return y + discount * float(target_net(r.last_obs[n])[1])


def _textbook_loss(net, target_net, r: Rollout) -> torch.Tensor:
    T, N = r.rewards.shape
    total = torch.zeros(())
    for t in range(T):
        for n in range(N):
            with torch.no_grad():
                y = _textbook_target(target_net, r, t, n)
            logits, v = net(r.obs[t, n])
            probs = torch.exp(logits) / torch.exp(logits).sum()
            log_pi = torch.log(probs[r.actions[t, n]])
            advantage = (y - v).detach()
            entropy = -(probs * torch.log(probs)).sum()
            total = total + 0.5 * (v - y) ** 2 - advantage * log_pi - ENTROPY_COEF * entropy
    return total / (T * N)


@pytest.mark.parametrize("shared", [False, True])
def test_pushed_gradient_equals_autograd_of_the_textbook_loss(shared):
    torch.manual_seed(0)
    net = ActorCritic(obs_dim=3, n_actions=2, hidden=(5,), shared=shared)
    target_net = ActorCritic(obs_dim=3, n_actions=2, hidden=(5,), shared=shared)  # other weights
    flat = FlatParams(net)
    rollout = _rollout(3, 2)

    grad, info = a3c_gradients(net, target_net, rollout, GAMMA, ENTROPY_COEF, flat)

    expected_loss = _textbook_loss(net, target_net, rollout)
    expected_grads = torch.autograd.grad(expected_loss, flat.params)
    expected = torch.cat([g.reshape(-1) for g in expected_grads]).numpy()
    assert grad.dtype == np.float32 and grad.shape == (flat.size,)
    np.testing.assert_allclose(grad, expected, rtol=0, atol=1e-6)
    assert info["loss"] == pytest.approx(expected_loss.item(), abs=1e-6)
    assert all(p.grad is None for p in target_net.parameters())


def test_pushed_gradient_is_a_copy_and_clipped_to_max_grad_norm():
    torch.manual_seed(1)
    net, target_net = ActorCritic(3, 2, (5,)), ActorCritic(3, 2, (5,))
    flat = FlatParams(net)
    rollout = _rollout(3, 2)
    full, info = a3c_gradients(net, target_net, rollout, GAMMA, ENTROPY_COEF, flat)
    assert info["grad_norm"] == pytest.approx(np.linalg.norm(full), rel=1e-5)
    limit = info["grad_norm"] / 4
    clipped, _ = a3c_gradients(net, target_net, rollout, GAMMA, ENTROPY_COEF, flat, max_grad_norm=limit)
    np.testing.assert_allclose(clipped, full / 4, rtol=1e-5, atol=1e-7)
    assert np.linalg.norm(full) == pytest.approx(info["grad_norm"], rel=1e-5)  # not overwritten


def test_descent_on_the_loss_raises_ln_pi_of_an_action_with_positive_advantage():
    logits = torch.zeros(1, 3, requires_grad=True)
    values, returns, actions = torch.tensor([0.0]), torch.tensor([2.0]), torch.tensor([1])
    loss, info = a3c_loss(logits, values, actions, returns, entropy_coef=0.0)
    loss.backward()
    assert logits.grad is not None
    stepped = torch.log_softmax(logits.detach() - 0.1 * logits.grad, -1)
    assert stepped[0, 1] > math.log(1 / 3)
    assert info["advantage"] == 2.0 and info["value_loss"] == 2.0


# --- entropy bonus ----------------------------------------------------------------------------

def test_entropy_bonus_lowers_the_loss_of_a_uniform_policy():
    logits, values = torch.zeros(4, 3), torch.ones(4)
    actions, returns = torch.tensor([0, 1, 2, 0]), torch.ones(4)
    without, _ = a3c_loss(logits, values, actions, returns, entropy_coef=0.0)
    with_bonus, info = a3c_loss(logits, values, actions, returns, entropy_coef=0.1)
    assert info["entropy"] == pytest.approx(math.log(3))
    assert with_bonus.item() == pytest.approx(without.item() - 0.1 * math.log(3))


def test_entropy_gradient_pushes_toward_higher_entropy():
    logits = torch.tensor([[2.0, 0.0, -1.0]], requires_grad=True)
    values = returns = torch.tensor([0.5])  # zero advantage: only the entropy term acts
    loss, info = a3c_loss(logits, values, torch.tensor([0]), returns, entropy_coef=1.0)
    loss.backward()
    assert logits.grad is not None
    probs = torch.softmax(logits.detach() - 0.1 * logits.grad, -1)
    assert -(probs * probs.log()).sum().item() > info["entropy"]


# --- soft target -----------------------------------------------------------------------------

def test_soft_update_copies_at_tau_one_and_averages_at_one_half():
    target = np.array([0.0, 2.0, -4.0], np.float32)
    online = np.array([1.0, 4.0, 4.0], np.float32)
    copied = soft_update(target, online, tau=1.0)
    np.testing.assert_array_equal(copied, online)
    assert copied is not online
    averaged = soft_update(target, online, tau=0.5)
    np.testing.assert_array_equal(averaged, [0.5, 3.0, 0.0])
    assert averaged.dtype == np.float32
    with pytest.raises(ValueError, match="tau"):
        soft_update(target, online, tau=0.0)


# --- parameter groups ------------------------------------------------------------------------

@pytest.mark.parametrize("shared", [False, True])
def test_param_groups_cover_every_parameter_exactly_once(shared):
    net = ActorCritic(obs_dim=4, n_actions=2, hidden=(8, 8), shared=shared)
    flat = FlatParams(net)
    policy_mask, value_mask = net.param_groups(flat)
    assert policy_mask.shape == value_mask.shape == (flat.size,)
    assert np.all(policy_mask ^ value_mask)
    flat.set(value_mask.astype(np.float32))  # 1 on value entries, 0 on policy entries
    assert all(bool((p == 1).all()) for p in net.value.parameters())
    policy_side = [*net.policy.parameters(), *(net.torso.parameters() if shared else ())]
    assert all(bool((p == 0).all()) for p in policy_side)
    with pytest.raises(ValueError):
        net.param_groups(FlatParams(ActorCritic(4, 2, (8, 8), shared=shared)))


def test_forward_shapes():
    logits, value = ActorCritic(4, 3, (8,), shared=True)(torch.zeros(5, 2, 4))
    assert logits.shape == (5, 2, 3) and value.shape == (5, 2)


# --- config ----------------------------------------------------------------------------------

def test_config_defaults_are_valid():
    cfg = A3CConfig()
    assert cfg.unroll_length >= 1 and 0 < cfg.gamma <= 1 and cfg.target_tau == 1.0


@pytest.mark.parametrize("field, value", [
    ("unroll_length", -1), ("entropy_coef", -0.1), ("envs_per_actor", 0), ("gamma", 0.0),
    ("gamma", 1.5), ("lr_policy", 0.0), ("lr_value", -1e-3), ("target_tau", 0.0),
    ("hidden", (64, 0)), ("hidden", [64]), ("shared_torso", "yes"), ("max_grad_norm", 0.0),
    ("gae_lambda", 1.5), ("gae_lambda", -0.1),
])
def test_config_rejects_bad_values_naming_the_field(field, value):
    with pytest.raises(ConfigError) as err:
        A3CConfig(**{field: value})
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ")


# --- invalid slots (a vectorised env's reset step) -------------------------------------------

def test_masked_loss_is_the_loss_of_the_valid_steps_alone():
    g = torch.Generator().manual_seed(5)
    logits, values = torch.randn(6, 3, generator=g), torch.randn(6, generator=g)
    actions, returns = torch.randint(0, 3, (6,), generator=g), torch.randn(6, generator=g)
    mask = torch.tensor([True, False, True, True, False, True])
    masked, info = a3c_loss(logits, values, actions, returns, ENTROPY_COEF, mask)
    alone, alone_info = a3c_loss(logits[mask], values[mask], actions[mask], returns[mask], ENTROPY_COEF)
    assert masked.item() == pytest.approx(alone.item(), abs=1e-6)
    assert info == pytest.approx(alone_info, abs=1e-6)


@pytest.mark.parametrize("lam", [1.0, 0.9])
def test_an_invalid_slot_joins_no_loss_term_and_no_return(lam):
    torch.manual_seed(2)
    net, target_net = ActorCritic(3, 2, (5,)), ActorCritic(3, 2, (5,))
    base = _rollout(3, 2)
    valid = torch.ones(4, 2, dtype=torch.bool)
    valid[2, 0] = False   # env 0 resets at t=2, after terminating at t=1
    assert isinstance(base.obs, torch.Tensor) and isinstance(base.rewards, torch.Tensor)
    garbage = dataclasses.replace(base, obs=base.obs.clone(), rewards=base.rewards.clone(), valid=valid)
    garbage.obs[2, 0] += 100.0
    garbage.rewards[2, 0] = 1e6
    clean = dataclasses.replace(base, valid=valid)
    targets = rollout_targets(target_net, garbage, GAMMA, lam)
    assert targets[1, 0].item() == pytest.approx(base.rewards[1, 0].item())  # terminated: no bootstrap
    flat = FlatParams(net)
    g_garbage, _ = a3c_gradients(net, target_net, garbage, GAMMA, ENTROPY_COEF, flat, lam=lam)
    g_clean, _ = a3c_gradients(net, target_net, clean, GAMMA, ENTROPY_COEF, flat, lam=lam)
    np.testing.assert_allclose(g_garbage, g_clean, rtol=0, atol=1e-7)


def test_one_step_targets_bootstrap_from_the_target_value_of_the_next_observation():
    torch.manual_seed(4)
    target_net = ActorCritic(3, 2, (5,))
    T, N = 3, 2
    obs, rewards, last_obs = torch.randn(T, N, 3), torch.randn(T, N), torch.randn(N, 3)
    rollout = Rollout(obs=obs, actions=torch.zeros(T, N, dtype=torch.long), rewards=rewards,
                      dones=torch.zeros(T, N, dtype=torch.bool), last_obs=last_obs)
    with torch.no_grad():
        next_obs = torch.cat([obs[1:], last_obs.unsqueeze(0)])
        expected = rollout.rewards + GAMMA * target_net(next_obs)[1]
    torch.testing.assert_close(rollout_targets(target_net, rollout, GAMMA, lam=0.0), expected)
