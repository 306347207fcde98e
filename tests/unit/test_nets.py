import gymnasium as gym
import numpy as np
import pytest
import torch

from gorila.errors import ConfigError
from gorila.nets.actor_critic import ConvActorCritic
from gorila.nets.actor_critic_env import network_for
from gorila.nets.cnn import NatureCNN
from gorila.nets.inputs import observation_tensor
from gorila.nets.q import VectorQNetwork, greedy_policy, make_q_network


def test_nature_cnn_has_the_paper_shape_and_parameter_count():
    net = NatureCNN(n_actions=6)
    # conv 4->32 8x8, 32->64 4x4, 64->64 3x3, fc 3136->512, 512->6 (weights + biases)
    assert sum(p.numel() for p in net.parameters()) == 8224 + 32832 + 36928 + 1606144 + 3078 == 1_687_206
    q = net(torch.zeros(3, 4, 84, 84, dtype=torch.uint8))
    assert q.shape == (3, 6) and q.dtype == torch.float32


def test_nature_cnn_scales_pixels_to_unit_range():
    net = NatureCNN(n_actions=2)
    seen = []
    net.features[0].register_forward_hook(lambda module, inputs, output: seen.append(inputs[0]))
    net(torch.full((1, 4, 84, 84), 255, dtype=torch.uint8))
    assert seen[0].dtype == torch.float32 and torch.all(seen[0] == 1.0)


def test_make_q_network_picks_mlp_for_vectors_and_cnn_for_images():
    vector = make_q_network(gym.spaces.Box(-1, 1, (4,), np.float32), 2, hidden=(16,))
    assert isinstance(vector, VectorQNetwork)
    assert [m.out_features for m in vector.modules() if isinstance(m, torch.nn.Linear)] == [16, 2]
    assert vector(torch.zeros(5, 4, dtype=torch.float64)).shape == (5, 2)
    image = make_q_network(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), 6)
    assert isinstance(image, NatureCNN)


@pytest.mark.parametrize("space", [gym.spaces.Discrete(5), gym.spaces.Box(0, 1, (2, 3), np.float32)])
def test_make_q_network_rejects_other_observation_spaces(space):
    with pytest.raises(ConfigError) as e:
        make_q_network(space, 2)
    assert e.value.field == "env"


@pytest.mark.parametrize("dtype", [bool, np.uint8, np.float64])
def test_observations_reach_a_cpu_network_as_float32_of_the_same_values(dtype):
    obs = (np.arange(2 * 4 * 10 * 10).reshape(2, 4, 10, 10) % 3 == 0).astype(dtype)
    x = observation_tensor(obs, torch.device("cpu"))
    assert x.dtype == torch.float32 and np.array_equal(x.numpy(), obs.astype(np.float32))


def test_greedy_policy_on_boolean_grids_is_the_argmax_of_the_network():
    # gymnasium's Box types leave out bool, which it supports (MinAtar's grids)
    space = gym.spaces.Box(0, 1, (4, 10, 10), dtype=bool)  # type: ignore[arg-type]
    torch.manual_seed(0)
    net = make_q_network(space, 3).eval()
    obs = np.stack([space.sample() for _ in range(16)])
    with torch.no_grad():
        expected = net(torch.as_tensor(obs)).argmax(1).numpy()
    assert greedy_policy(net)(obs).tolist() == expected.tolist()


@pytest.mark.parametrize("encoder, parameters, width", [("nature", 1_687_719, 512), ("mnih2013", 677_943, 256)])
def test_an_atari_actor_critic_is_built_on_the_encoder_asked_for(encoder, parameters, width):
    # Pong: 6 actions; the sizes are those of the papers' layers (nets/encoders.py's table)
    net = network_for(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Discrete(6), (64, 64), False,
                      encoder=encoder)
    assert isinstance(net, ConvActorCritic)
    assert sum(p.numel() for p in net.parameters()) == parameters and net.policy.in_features == width
    logits, value = net(torch.zeros(3, 5, 4, 84, 84, dtype=torch.uint8))  # a rollout's (T, N) axes
    assert logits.shape == (3, 5, 6) and value.shape == (3, 5)


def test_a_learners_pass_gives_the_actors_outputs():
    # The learner's pass (gradients on: its batch in channels-last order) and the actor's (no
    # gradient: the default order) compute the same function: V-trace's importance weights of the
    # actor's own data stay 1 up to float rounding.
    net = ConvActorCritic(6, encoder="mnih2013")
    obs = torch.randint(0, 256, (16, 4, 84, 84), dtype=torch.uint8)
    with torch.no_grad():
        acting, acting_value = net(obs)
    learning, learning_value = net(obs)
    assert learning.requires_grad
    torch.testing.assert_close(learning.detach(), acting, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(learning_value.detach(), acting_value, rtol=1e-5, atol=1e-6)


MINATAR_GRID = gym.spaces.Box(0, 1, (4, 10, 10), dtype=bool)  # type: ignore[arg-type]


@pytest.mark.parametrize("space", [gym.spaces.Box(-1, 1, (4,)), MINATAR_GRID])
def test_an_encoder_asked_for_observations_that_are_not_frames_is_refused_by_name(space):
    # CartPole's vectors and MinAtar's grids have networks of their own: an encoder would be ignored
    with pytest.raises(ConfigError) as e:
        network_for(space, gym.spaces.Discrete(2), (64, 64), False, encoder="mnih2013")
    assert e.value.field == "encoder"


def test_an_atari_actor_critic_starts_orthogonal_with_a_near_uniform_policy():
    # As Baselines' Atari actor-critics start: torso layers orthogonal with ReLU's gain √2, the policy
    # head at gain 0.01 (a near-uniform first policy), biases at 0.
    net = ConvActorCritic(6, encoder="mnih2013")
    convolutions = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    first = convolutions[0].weight.detach().reshape(16, -1)  # 16 filters of 4 x 8 x 8
    torch.testing.assert_close(first @ first.T, 2.0 * torch.eye(16), atol=1e-4, rtol=0.0)
    assert all(m.bias is not None and not m.bias.detach().any() for m in convolutions)
    with torch.no_grad():
        logits, _ = net(torch.randint(0, 256, (8, 4, 84, 84), dtype=torch.uint8))
    probabilities = torch.softmax(logits, -1)
    assert float((probabilities - 1 / 6).abs().max()) < 0.02
