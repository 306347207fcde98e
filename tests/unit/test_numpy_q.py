"""The Q-networks' numpy twins (what the evaluator and the Q-actors play): the torch network's
Q-values and greedy actions on the same flat vector, plain and dueling, MLP and MinAtar; ties broken
as torch breaks them; found only for networks laid out as the twin reads them."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from gorila.nets import FlatParams
from gorila.nets.cnn import DuelingHead, NatureCNN
from gorila.nets.minatar import MinAtarQNetwork
from gorila.nets.numpy_conv import NumpyMinAtarNet
from gorila.nets.numpy_mlp import NumpyDueling, NumpyMLP
from gorila.nets.q import TorchQNetwork, VectorQNetwork, make_q_network, numpy_q_network

NETWORKS = {
    "mlp": (lambda: VectorQNetwork(4, (64, 64), 3), (4,)),
    "mlp one layer": (lambda: VectorQNetwork(5, (16,), 2), (5,)),
    "dueling mlp": (lambda: VectorQNetwork(4, (64, 64), 3, dueling=True), (4,)),
    "dueling mlp one layer": (lambda: VectorQNetwork(5, (16,), 4, dueling=True), (5,)),  # the streams read obs
    "dueling mlp deep": (lambda: VectorQNetwork(6, (16, 32, 8), 5, dueling=True), (6,)),
    "minatar": (lambda: MinAtarQNetwork(6, 4), (4, 10, 10)),
    "dueling minatar": (lambda: MinAtarQNetwork(3, 4, dueling=True), (4, 10, 10)),
    "dueling minatar 7x9": (lambda: MinAtarQNetwork(5, 3, (7, 9), dueling=True), (3, 7, 9)),  # not square
}


def randomised(net: torch.nn.Module, seed: int = 0) -> np.ndarray:
    """Random parameters throughout, loaded into ``net``; the vector."""
    flat = np.random.default_rng(seed).normal(0, 0.3, FlatParams(net).size).astype(np.float32)
    FlatParams(net).set(flat)
    return flat


def observations(shape: tuple[int, ...], n: int = 256) -> np.ndarray:
    rng = np.random.default_rng(1)
    if len(shape) == 3:
        return rng.random((n, *shape)) < 0.3  # MinAtar's boolean grids
    return rng.normal(size=(n, *shape))  # float64: cast as the network casts


@pytest.mark.parametrize("name", NETWORKS)
def test_the_twin_computes_the_torch_networks_q_values_and_greedy_actions(name):
    make, shape = NETWORKS[name]
    net = make()
    flat = randomised(net)
    twin = numpy_q_network(net)
    assert twin is not None and isinstance(twin, NumpyDueling) == ("dueling" in name)
    twin.set(flat)
    obs = observations(shape)
    with torch.no_grad():
        expected = net(torch.as_tensor(obs)).numpy()
    q = twin(obs)
    assert q.dtype == np.float32
    np.testing.assert_allclose(q, expected, rtol=1e-4, atol=1e-5)
    assert len(np.unique(expected.argmax(1))) > 1  # the comparison of actions means something
    ordered = np.sort(expected, axis=1)
    clear = ordered[:, -1] - ordered[:, -2] > 1e-4  # rows whose argmax rounding cannot move
    assert clear.mean() > 0.9
    np.testing.assert_array_equal(twin.greedy(obs)[clear], expected.argmax(1)[clear])


@pytest.mark.parametrize("name", ["mlp", "dueling mlp", "minatar", "dueling minatar"])
def test_equal_q_values_go_to_the_first_action_as_torchs_argmax_does(name):
    make, shape = NETWORKS[name]
    net = make()
    flat = np.zeros(FlatParams(net).size, np.float32)
    last_bias = FlatParams(net).slices()[list(FlatParams(net).slices())[-1]]  # the (advantage) output's bias
    n_actions = last_bias.stop - last_bias.start
    flat[last_bias] = [0.0] + [2.0] * (n_actions - 1)  # every action but the first ties for the max
    twin, torch_net = numpy_q_network(net), TorchQNetwork(net)
    assert twin is not None
    twin.set(flat)
    torch_net.set(flat)
    obs = observations(shape, n=8)
    np.testing.assert_array_equal(torch_net.greedy(obs), np.ones(8))  # torch: the first of the maxima
    np.testing.assert_array_equal(twin.greedy(obs), torch_net.greedy(obs))


def test_the_twin_of_a_network_is_the_kind_it_needs_and_the_nature_cnn_has_none():
    box = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    # gymnasium's Box types leave out bool, which it supports (MinAtar's grids)
    grid = gym.spaces.Box(0, 1, (4, 10, 10), np.bool_)  # type: ignore[arg-type]
    assert type(numpy_q_network(make_q_network(box, 2))) is NumpyMLP
    assert type(numpy_q_network(make_q_network(grid, 3))) is NumpyMinAtarNet
    dueling = numpy_q_network(make_q_network(grid, 3, dueling=True))
    assert isinstance(dueling, NumpyDueling) and isinstance(dueling.inner, NumpyMinAtarNet)
    assert dueling.total == FlatParams(make_q_network(grid, 3, dueling=True)).size
    assert numpy_q_network(NatureCNN(6)) is None
    assert numpy_q_network(NatureCNN(6, dueling=True)) is None


class TorsoLast(MinAtarQNetwork):
    """A dueling MinAtar network whose convolution is registered after its head: its flat vector
    begins with the streams, which a twin reading the convolution first would misread."""

    def __init__(self):
        super().__init__(3, 4, dueling=True)
        features = self.features
        del self.features
        self.features = features


def test_a_network_laid_out_otherwise_in_the_flat_vector_has_no_twin():
    net = TorsoLast()
    assert isinstance(net.head, DuelingHead)
    assert next(net.parameters()) is net.head.value[0].weight  # the layout the twin would misread
    assert numpy_q_network(net) is None


def test_a_vector_of_another_length_is_refused():
    twin = numpy_q_network(VectorQNetwork(4, (8,), 2, dueling=True))
    assert isinstance(twin, NumpyDueling)
    with pytest.raises(ValueError, match=f"expected {twin.total} parameters"):
        twin.set(np.zeros(twin.total + 1, np.float32))
