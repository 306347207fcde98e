"""MinAtar's networks in numpy (actors and the evaluator play them there): the same outputs as the
torch network on the same flat vector, for the actor-critic's policy and the plain Q-network, on
grids of any size; found only for those two."""

import numpy as np
import pytest
import torch

from gorila.nets import FlatParams
from gorila.nets.actor_critic import ConvActorCritic
from gorila.nets.minatar import MinAtarActorCritic, MinAtarQNetwork, numpy_minatar
from gorila.nets.numpy_conv import NumpyMinAtarNet


def randomised(net: torch.nn.Module) -> np.ndarray:
    """Random parameters throughout (the policy head is not left near zero, where a copy reading the
    wrong entries could still agree), loaded into ``net``; the vector."""
    flat = np.random.default_rng(0).normal(0, 0.3, FlatParams(net).size).astype(np.float32)
    FlatParams(net).set(flat)
    return flat


@pytest.mark.parametrize("make, channels, size", [
    (lambda c, s: MinAtarActorCritic(3, c, s), 4, (10, 10)),
    (lambda c, s: MinAtarActorCritic(5, c, s), 3, (7, 9)),   # not square: a transposed layout shows
    (lambda c, s: MinAtarQNetwork(6, c, s), 6, (10, 10)),
    (lambda c, s: MinAtarQNetwork(4, c, s), 2, (6, 11)),
], ids=["actor-critic", "actor-critic 7x9", "q-network", "q-network 6x11"])
def test_the_numpy_network_computes_the_torch_networks_outputs(make, channels, size):
    net = make(channels, size)
    flat = randomised(net)
    twin = numpy_minatar(net)
    assert twin is not None
    twin.set(flat)  # the whole vector in, the value head and all
    obs = np.random.default_rng(1).random((64, channels, *size)) < 0.3  # MinAtar's boolean grids
    with torch.no_grad():
        out = net(torch.as_tensor(obs))
    expected = (out[0] if isinstance(out, tuple) else out).numpy()
    np.testing.assert_allclose(twin(obs), expected, rtol=1e-4, atol=1e-5)
    assert len(np.unique(expected.argmax(1))) > 1  # the greedy comparison below means something
    assert (twin.greedy(obs) == expected.argmax(1)).mean() > 0.99  # a near-tie may round either way


def test_only_plain_minatar_networks_have_a_numpy_twin():
    assert isinstance(numpy_minatar(MinAtarActorCritic(3, 4)), NumpyMinAtarNet)
    assert numpy_minatar(MinAtarQNetwork(3, 4, dueling=True)) is None
    assert numpy_minatar(ConvActorCritic(6)) is None


def test_a_vector_of_another_networks_length_is_refused():
    twin = numpy_minatar(MinAtarActorCritic(3, 4))
    assert twin is not None
    with pytest.raises(ValueError, match=f"expected {twin.total} parameters"):
        twin.set(np.zeros(twin.size, np.float32))  # the policy's entries only: not the network's vector
