"""Server-side optimizers against their textbook formulas, computed here in float64."""

import copy
import pickle

import numpy as np
import pytest

from gorila.errors import ConfigError
from gorila.params import make_optimizer

G = [np.array([0.5, -1.0, 2.0], np.float32), np.array([-0.25, 0.5, 1.0], np.float32)]


def run(name, lr=0.1):
    opt = make_optimizer(name, 3, lr)
    w = np.ones(3, np.float32)
    for g in G:
        opt.step(w, g)
    return w


def test_sgd():
    np.testing.assert_allclose(run("sgd"), 1 - 0.1 * (G[0] + G[1]), rtol=1e-6)


def test_momentum():
    v1 = G[0]
    v2 = 0.9 * v1 + G[1]
    np.testing.assert_allclose(run("momentum"), 1 - 0.1 * (v1 + v2), rtol=1e-6)


def test_adagrad():
    s1 = G[0].astype(np.float64) ** 2
    s2 = s1 + G[1].astype(np.float64) ** 2
    w = 1 - 0.1 * G[0] / (np.sqrt(s1) + 1e-8) - 0.1 * G[1] / (np.sqrt(s2) + 1e-8)
    np.testing.assert_allclose(run("adagrad"), w, rtol=1e-5)


def test_rmsprop():
    s1 = 0.01 * G[0].astype(np.float64) ** 2
    s2 = 0.99 * s1 + 0.01 * G[1].astype(np.float64) ** 2
    w = 1 - 0.1 * G[0] / (np.sqrt(s1) + 1e-5) - 0.1 * G[1] / (np.sqrt(s2) + 1e-5)
    np.testing.assert_allclose(run("rmsprop"), w, rtol=1e-5)


def test_adam():
    m = v = 0.0
    w = np.ones(3)
    for t, g in enumerate(G, start=1):
        g = g.astype(np.float64)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        w = w - 0.1 * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    np.testing.assert_allclose(run("adam"), w, rtol=1e-5)


def test_per_parameter_learning_rates():
    lr = np.array([0.1, 0.0, 1.0], np.float32)
    np.testing.assert_allclose(run("sgd", lr=lr), 1 - lr * (G[0] + G[1]), rtol=1e-6)


def test_unknown_optimizer_names_the_field():
    with pytest.raises(ConfigError, match="optimizer: must be one of sgd, momentum, adagrad, rmsprop, adam"):
        make_optimizer("lbfgs", 3, 0.1)


@pytest.mark.parametrize("name", ["momentum", "adagrad", "rmsprop", "adam"])
@pytest.mark.parametrize("copy_of", [lambda o: pickle.loads(pickle.dumps(o)), copy.deepcopy], ids=["pickle", "deepcopy"])
def test_a_copied_optimizer_steps_the_state_it_saves(name, copy_of):
    # A shard reaches its process pickled, and is deep-copied there: its state_dict (checkpoints)
    # and the finite check must still read the state the step moves.
    opt = make_optimizer(name, 3, 0.1)
    opt.step(np.ones(3, np.float32), G[0])
    twin = copy_of(opt)
    w, w_twin = np.ones(3, np.float32), np.ones(3, np.float32)
    opt.step(w, G[1])
    twin.step(w_twin, G[1])
    np.testing.assert_array_equal(w_twin, w)
    for key, value in opt.state_dict().items():
        np.testing.assert_array_equal(twin.state_dict()[key], value, err_msg=key)
