import gymnasium as gym
import numpy as np
import pytest
import torch

from gorila.errors import ConfigError
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
