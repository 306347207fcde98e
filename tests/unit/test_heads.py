"""The action heads (nets/heads.py): the Gaussian's log-probability and entropy against torch's Normal,
the categorical one against torch's Categorical, and Box actions clipped for the env only."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from gorila.envs import make_env_runner
from gorila.envs.faults import EnvCheck
from gorila.errors import ConfigError
from gorila.nets.heads import CategoricalHead, GaussianHead, head_for


@pytest.mark.parametrize("size", [1, 3, 6])
def test_the_gaussian_log_probability_and_entropy_are_torchs_normal(size):
    rng = torch.Generator().manual_seed(size)
    mean = torch.randn(5, 7, size, generator=rng) * 3
    log_std = torch.randn(5, 7, size, generator=rng)
    actions = torch.randn(5, 7, size, generator=rng) * 4
    head, out = GaussianHead(size), torch.cat([mean, log_std], -1)
    normal = torch.distributions.Normal(mean, log_std.exp())
    torch.testing.assert_close(head.log_prob(out, actions), normal.log_prob(actions).sum(-1))
    torch.testing.assert_close(head.entropy(out), normal.entropy().sum(-1))
    torch.testing.assert_close(head.mode(out), mean)


def test_a_gaussian_sample_carries_its_own_log_probability_and_follows_the_distribution():
    head = GaussianHead(2)
    out = torch.tensor([[1.0, -2.0, np.log(0.5), np.log(3.0)]], dtype=torch.float32).expand(20_000, 4)
    actions, log_probs = head.sample(out, torch.Generator().manual_seed(0))
    torch.testing.assert_close(log_probs, head.log_prob(out, actions))
    np.testing.assert_allclose(actions.mean(0).numpy(), [1.0, -2.0], atol=0.05)
    np.testing.assert_allclose(actions.std(0).numpy(), [0.5, 3.0], rtol=0.03)


def test_the_categorical_head_is_torchs_categorical():
    logits = torch.randn(6, 4, generator=torch.Generator().manual_seed(1))
    actions = torch.tensor([0, 1, 2, 3, 1, 0])
    head, categorical = CategoricalHead(4), torch.distributions.Categorical(logits=logits)
    torch.testing.assert_close(head.log_prob(logits, actions), categorical.log_prob(actions))
    torch.testing.assert_close(head.entropy(logits), categorical.entropy())
    chosen, log_probs = head.sample(logits, torch.Generator().manual_seed(2))
    torch.testing.assert_close(log_probs, categorical.log_prob(chosen))


def test_heads_follow_the_action_space_and_refuse_others():
    assert head_for(gym.spaces.Discrete(3)) == CategoricalHead(3)
    assert head_for(gym.spaces.Box(-1, 1, (2, 3))) == GaussianHead(6)
    with pytest.raises(ConfigError, match="impala takes Discrete or Box actions") as e:
        head_for(gym.spaces.MultiDiscrete([2, 2]), "impala")
    assert e.value.field == "env"


def test_box_actions_are_clipped_and_shaped_for_the_env_while_the_sample_keeps_its_log_probability():
    space = gym.spaces.Box(np.array([[-1.0, 0.0]], np.float32), np.array([[1.0, 2.0]], np.float32))
    head, check = head_for(space), EnvCheck("box", gym.spaces.Box(-1, 1, (3,)), space)
    out = torch.zeros(500, 4)  # mean 0, std 1: many samples fall outside [-1, 1] x [0, 2]
    actions, log_probs = head.sample(out, torch.Generator().manual_seed(3))
    sent = check.env_actions(actions.numpy())
    assert sent.shape == (500, 1, 2) and sent.dtype == np.float32
    assert sent[..., 0].min() == -1.0 and sent[..., 0].max() == 1.0 and sent[..., 1].min() == 0.0
    inside = ((actions[:, 0].abs() <= 1) & (actions[:, 1] >= 0) & (actions[:, 1] <= 2)).numpy()
    assert 0 < inside.sum() < 500
    np.testing.assert_array_equal(sent.reshape(500, 2)[inside], actions.numpy()[inside])
    # what is learnt from is the unclipped sample: its log-probability is the Gaussian's, exactly
    torch.testing.assert_close(log_probs, torch.distributions.Normal(0.0, 1.0).log_prob(actions).sum(-1))
    assert check.env_action(np.array([5.0, -5.0], np.float32)).tolist() == [[1.0, 0.0]]


class TorqueEnv(gym.Env):
    """One step: the reward is the action it was sent (which a Box of [-2, 2] bounds), unclipped."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), float(action[0]), True, False, {}


def test_the_runner_steps_the_env_with_clipped_actions_and_hands_back_the_sampled_ones():
    if "gorila-test/Torque-v0" not in gym.registry:
        # gymnasium's EnvCreator wants **kwargs; an env class is its documented entry point
        gym.register("gorila-test/Torque-v0", entry_point=TorqueEnv)  # type: ignore[arg-type]
    with make_env_runner("gorila-test/Torque-v0", 3, seed=0, training=True) as runner:
        t = runner.step(np.array([[7.0], [-0.5], [-3.0]], np.float32))
    np.testing.assert_array_equal(t.action, [[7.0], [-0.5], [-3.0]])  # what the policy sampled
    np.testing.assert_array_equal(t.reward, [2.0, -0.5, -2.0])        # what the env was sent


@pytest.mark.parametrize("head", [CategoricalHead(4), GaussianHead(2)], ids=["categorical", "gaussian"])
def test_a_losss_log_probability_and_entropy_in_one_pass_are_the_heads_own(head):
    """What the losses read (``log_prob_and_entropy``) is ``log_prob`` and ``entropy``; for the
    categorical head, exactly the graph a loss that took ``log_softmax`` once builds, so gradients
    round as they did before heads existed (a run of a seed is the same run)."""
    rng = torch.Generator().manual_seed(2)
    out = torch.randn(6, 4, generator=rng, requires_grad=True)
    actions = torch.tensor([0, 1, 2, 3, 1, 0]) if isinstance(head, CategoricalHead) else torch.randn(6, 2)
    log_pi, entropy = head.log_prob_and_entropy(out, actions)
    torch.testing.assert_close(log_pi, head.log_prob(out, actions), rtol=0, atol=0)
    torch.testing.assert_close(entropy, head.entropy(out), rtol=0, atol=0)
    if isinstance(head, CategoricalHead):
        (grad,) = torch.autograd.grad((log_pi - 0.01 * entropy).sum(), out)
        log_probs = torch.log_softmax(out, -1)
        once = log_probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1) + 0.01 * (log_probs.exp() * log_probs).sum(-1)
        (want,) = torch.autograd.grad(once.sum(), out)
        assert torch.equal(grad, want)


@pytest.mark.parametrize("algo", ["a3c", "impala", "ppo"])
def test_log_std_init_sets_the_spread_of_the_first_policy(algo):
    """``--log-std-init`` reaches the network that actors sample from (and the learner trains)."""
    from gorila.agents.registry import ALGORITHMS
    from gorila.launch import configs_from_values

    run, configs = configs_from_values(algo, {"env": "Pendulum-v1", "log_std_init": -2.0})
    network_fn, _ = ALGORITHMS[algo].policy_fn()(run, *configs)
    out, _ = network_fn()(torch.zeros(5, 3))
    torch.testing.assert_close(out[:, 1], torch.full((5,), -2.0))  # Pendulum's mean, then its log-std
    actions, _ = GaussianHead(1).sample(torch.cat([torch.zeros(20_000, 1), out[:1, 1:].expand(20_000, 1)], 1),
                                         torch.Generator().manual_seed(0))
    assert actions.std().item() == pytest.approx(np.exp(-2.0), rel=0.03)
