"""V-trace, GAE and PPO's clipped surrogate: behaviour against definitions computed by hand."""

import math

import pytest
import torch

from gorila.agents.ppo.gae import gae
from gorila.agents.ppo.surrogate import ppo_loss
from gorila.losses.vtrace import vtrace_targets

T, B = 6, 3


def _inputs(seed, gamma=0.9, terminate_p=0.2
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randn(T, B, generator=g, dtype=torch.float64)
    values = torch.randn(T, B, generator=g, dtype=torch.float64)
    bootstrap = torch.randn(B, generator=g, dtype=torch.float64)
    terminated = torch.rand(T, B, generator=g, dtype=torch.float64) < terminate_p
    discounts = gamma * (~terminated).double()
    log_rhos = torch.randn(T, B, generator=g, dtype=torch.float64)
    return log_rhos, discounts, rewards, values, bootstrap


def _n_step_returns(discounts, rewards, bootstrap):
    returns = torch.empty_like(rewards)
    following = bootstrap
    for t in reversed(range(rewards.shape[0])):
        following = rewards[t] + discounts[t] * following
        returns[t] = following
    return returns


def _paper_vtrace(log_rhos, discounts, rewards, values, bootstrap, rho_bar, c_bar, pg_rho_bar):
    """Eq. (1) of the IMPALA paper term by term, with the discount of each step inside the product."""
    rhos = log_rhos.exp()
    vs = torch.empty_like(values)
    vals = torch.cat([values, bootstrap.unsqueeze(0)])
    for b in range(B):
        for s in range(T):
            total = vals[s, b].item()
            for t in range(s, T):
                weight = 1.0
                for i in range(s, t):
                    weight *= discounts[i, b].item() * min(c_bar, rhos[i, b].item())
                delta = min(rho_bar, rhos[t, b].item()) * (rewards[t, b].item() + discounts[t, b].item()
                                                           * vals[t + 1, b].item() - vals[t, b].item())
                total += weight * delta
            vs[s, b] = total
    next_vs = torch.cat([vs[1:], bootstrap.unsqueeze(0)])
    pg = torch.empty_like(values)
    for b in range(B):
        for s in range(T):
            pg[s, b] = min(pg_rho_bar, rhos[s, b].item()) * (rewards[s, b] + discounts[s, b] * next_vs[s, b]
                                                             - values[s, b])
    return vs, pg


def test_on_policy_vtrace_is_the_bootstrapped_n_step_return():
    _, discounts, rewards, values, bootstrap = _inputs(0)
    vs, pg = vtrace_targets(torch.zeros(T, B, dtype=torch.float64), discounts, rewards, values, bootstrap)
    expected = _n_step_returns(discounts, rewards, bootstrap)
    torch.testing.assert_close(vs, expected)


def test_on_policy_vtrace_advantages_are_gae_lambda_one():
    _, discounts, rewards, values, bootstrap = _inputs(1)
    _, pg = vtrace_targets(torch.zeros(T, B, dtype=torch.float64), discounts, rewards, values, bootstrap)
    advantages, returns = gae(discounts, rewards, values, bootstrap, lam=1.0)
    torch.testing.assert_close(pg, advantages)
    torch.testing.assert_close(returns, _n_step_returns(discounts, rewards, bootstrap))


def test_matches_the_papers_definition_on_random_inputs():
    for seed, (rho_bar, c_bar, pg_rho_bar) in enumerate([(1.0, 1.0, 1.0), (2.0, 0.5, 1.5), (0.7, 0.3, 0.9)]):
        args = _inputs(10 + seed)
        vs, pg = vtrace_targets(*args, rho_bar=rho_bar, c_bar=c_bar, pg_rho_bar=pg_rho_bar)
        ref_vs, ref_pg = _paper_vtrace(*args, rho_bar, c_bar, pg_rho_bar)
        torch.testing.assert_close(vs, ref_vs)
        torch.testing.assert_close(pg, ref_pg)


def test_a_large_importance_weight_is_clipped_in_the_advantages():
    _, discounts, rewards, values, bootstrap = _inputs(2)
    on = torch.zeros(T, B, dtype=torch.float64)
    big = on.clone()
    big[2, 1] = 5.0  # rho = e^5 ~ 148
    _, pg_on = vtrace_targets(on, discounts, rewards, values, bootstrap, pg_rho_bar=1.0)
    vs_big, pg_big = vtrace_targets(big, discounts, rewards, values, bootstrap, pg_rho_bar=1.0)
    vs_on, _ = vtrace_targets(on, discounts, rewards, values, bootstrap)
    # rho clipped at 1 on that step: the same advantage as on policy there (later steps are on policy too)
    torch.testing.assert_close(pg_big[2:], pg_on[2:])
    torch.testing.assert_close(vs_big, vs_on)
    _, pg_loose = vtrace_targets(big, discounts, rewards, values, bootstrap, pg_rho_bar=3.0)
    torch.testing.assert_close(pg_loose[2, 1], 3.0 * pg_on[2, 1])


def test_a_termination_inside_the_window_cuts_the_sum():
    rewards = torch.ones(4, 1, dtype=torch.float64)
    values = torch.zeros(4, 1, dtype=torch.float64)
    discounts = torch.full((4, 1), 0.5, dtype=torch.float64)
    discounts[1, 0] = 0.0  # the episode terminates at step 1: steps 2, 3 and the bootstrap do not reach 0, 1
    vs, pg = vtrace_targets(torch.zeros(4, 1, dtype=torch.float64), discounts, rewards, values,
                            torch.tensor([100.0], dtype=torch.float64))
    assert vs[:, 0].tolist() == pytest.approx([1.5, 1.0, 1 + 0.5 * (1 + 0.5 * 100), 1 + 0.5 * 100])
    assert pg[0, 0].item() == pytest.approx(1.5)


def test_gae_lambda_zero_is_the_one_step_td_error():
    _, discounts, rewards, values, bootstrap = _inputs(3)
    advantages, _ = gae(discounts, rewards, values, bootstrap, lam=0.0)
    next_values = torch.cat([values[1:], bootstrap.unsqueeze(0)])
    torch.testing.assert_close(advantages, rewards + discounts * next_values - values)


def test_gae_matches_the_sum_of_discounted_td_errors():
    _, discounts, rewards, values, bootstrap = _inputs(4)
    lam = 0.8
    advantages, _ = gae(discounts, rewards, values, bootstrap, lam=lam)
    next_values = torch.cat([values[1:], bootstrap.unsqueeze(0)])
    deltas = rewards + discounts * next_values - values
    for b in range(B):
        for s in range(T):
            total, weight = 0.0, 1.0
            for t in range(s, T):
                total += weight * deltas[t, b].item()
                weight *= discounts[t, b].item() * lam
            assert advantages[s, b].item() == pytest.approx(total)


def test_ppo_clips_the_ratio_in_the_direction_of_the_advantage():
    logits = torch.zeros(2, 2, requires_grad=True)  # pi(a) = 0.5
    actions = torch.tensor([0, 0])
    old = torch.log(torch.tensor([0.25, 0.25]))  # ratio 2 > 1 + 0.2
    advantages = torch.tensor([1.0, -1.0])
    loss, info = ppo_loss(logits, torch.zeros(2), actions, old, advantages, torch.zeros(2), clip=0.2)
    # positive advantage: clipped at 1.2 (no gradient); negative: min picks ratio * A = -2 (unclipped)
    assert info["policy_loss"] == pytest.approx(-(1.2 - 2.0) / 2)
    assert info["clip_fraction"] == 1.0
    loss.backward()
    assert logits.grad is not None
    assert logits.grad[0].abs().sum().item() == 0.0
    assert logits.grad[1].abs().sum().item() > 0.0


def test_ppo_value_clipping_takes_the_larger_error():
    values = torch.tensor([2.0], requires_grad=True)
    loss, info = ppo_loss(torch.zeros(1, 2), values, torch.tensor([0]), torch.tensor([math.log(0.5)]),
                          torch.tensor([0.0]), torch.tensor([0.0]), old_values=torch.tensor([0.0]), value_clip=0.5)
    assert info["value_loss"] == pytest.approx(0.5 * 4.0)  # max(2^2, 0.5^2)
    loss_unclipped, info2 = ppo_loss(torch.zeros(1, 2), torch.tensor([0.4]), torch.tensor([0]),
                                     torch.tensor([math.log(0.5)]), torch.tensor([0.0]), torch.tensor([1.0]),
                                     old_values=torch.tensor([0.0]), value_clip=0.5)
    assert info2["value_loss"] == pytest.approx(0.5 * 0.36)
