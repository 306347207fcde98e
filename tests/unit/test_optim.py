"""Server-side optimizers against their textbook formulas, computed here in float64, on both
backends (numpy for short slices, torch for long ones); a process that steps only short slices
never imports torch."""

import copy
import pickle
import subprocess
import sys

import numpy as np
import pytest

from gorila.errors import ConfigError
from gorila.params import make_optimizer, optim
from gorila.params.learning_rate import LinearDecay
from gorila.params.optim import OPTIMIZERS

G = [np.array([0.5, -1.0, 2.0], np.float32), np.array([-0.25, 0.5, 1.0], np.float32)]


@pytest.fixture(params=["numpy", "torch"])
def backend(request, monkeypatch):
    """The formula tests on both backends: torch from the first parameter, or never."""
    monkeypatch.setattr(optim, "TORCH_FROM", 1 if request.param == "torch" else 1 << 62)
    return request.param


def test_the_backend_is_the_one_asked_for(backend):
    adam = make_optimizer("adam", 3, 0.1)
    assert isinstance(adam, optim.Adam) and adam.uses_torch == (backend == "torch")


def run(name, lr=0.1):
    opt = make_optimizer(name, 3, lr)
    w = np.ones(3, np.float32)
    for g in G:
        opt.step(w, g)
    return w


def test_sgd(backend):
    np.testing.assert_allclose(run("sgd"), 1 - 0.1 * (G[0] + G[1]), rtol=1e-6)


def test_momentum(backend):
    v1 = G[0]
    v2 = 0.9 * v1 + G[1]
    np.testing.assert_allclose(run("momentum"), 1 - 0.1 * (v1 + v2), rtol=1e-6)


def test_adagrad(backend):
    s1 = G[0].astype(np.float64) ** 2
    s2 = s1 + G[1].astype(np.float64) ** 2
    w = 1 - 0.1 * G[0] / (np.sqrt(s1) + 1e-8) - 0.1 * G[1] / (np.sqrt(s2) + 1e-8)
    np.testing.assert_allclose(run("adagrad"), w, rtol=1e-5)


def test_rmsprop(backend):
    s1 = 0.01 * G[0].astype(np.float64) ** 2
    s2 = 0.99 * s1 + 0.01 * G[1].astype(np.float64) ** 2
    w = 1 - 0.1 * G[0] / (np.sqrt(s1) + 1e-5) - 0.1 * G[1] / (np.sqrt(s2) + 1e-5)
    np.testing.assert_allclose(run("rmsprop"), w, rtol=1e-5)


def test_adam(backend):
    m = v = np.zeros(3)
    w = np.ones(3)
    for t, g in enumerate(G, start=1):
        g = g.astype(np.float64)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        w = w - 0.1 * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    np.testing.assert_allclose(run("adam"), w, rtol=1e-5)


def test_per_parameter_learning_rates(backend):
    lr = np.array([0.1, 0.0, 1.0], np.float32)
    np.testing.assert_allclose(run("sgd", lr=lr), 1 - lr * (G[0] + G[1]), rtol=1e-6)


def test_unknown_optimizer_names_the_field():
    with pytest.raises(ConfigError, match="optimizer: must be one of sgd, momentum, adagrad, rmsprop, adam"):
        make_optimizer("lbfgs", 3, 0.1)


@pytest.mark.parametrize("name", ["momentum", "adagrad", "rmsprop", "adam"])
@pytest.mark.parametrize("copy_of", [lambda o: pickle.loads(pickle.dumps(o)), copy.deepcopy],
                         ids=["pickle", "deepcopy"])
def test_a_copied_optimizer_steps_the_state_it_saves(name, copy_of, backend):
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


@pytest.mark.parametrize("name", OPTIMIZERS)
@pytest.mark.parametrize("lr", [0.01, np.linspace(0.0, 0.02, 1000, dtype=np.float32), LinearDecay(0.01, 30)],
                         ids=["scalar", "vector", "decay"])
def test_the_backends_agree_over_many_steps(name, lr, monkeypatch):
    rng = np.random.default_rng(0)
    grads = rng.standard_normal((40, 1000)).astype(np.float32)
    finals = []
    for torch_from in (1, 1 << 62):
        monkeypatch.setattr(optim, "TORCH_FROM", torch_from)
        opt, w = make_optimizer(name, 1000, lr), np.ones(1000, np.float32)
        for g in grads:
            g.flags.writeable = False  # as gradients arrive from Ray or shared memory
            opt.step(w, g)
        finals.append((w, opt.state_dict()))
    (w_numpy, state_numpy), (w_torch, state_torch) = finals
    np.testing.assert_allclose(w_numpy, w_torch, rtol=1e-5, atol=1e-6)
    assert state_numpy.keys() == state_torch.keys()
    for key in state_numpy:
        np.testing.assert_allclose(state_numpy[key], state_torch[key], rtol=1e-5, atol=1e-7)


def test_short_slices_never_import_torch():
    code = ("import pickle, sys, numpy as np\n"
            "from gorila.params import make_optimizer\n"
            "for name in ('sgd', 'momentum', 'adagrad', 'rmsprop', 'adam'):\n"
            "    opt = pickle.loads(pickle.dumps(make_optimizer(name, 1000, 0.1)))\n"
            "    opt.step_finite(np.ones(1000, np.float32), np.ones(1000, np.float32))\n"
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]


def test_a_shard_that_never_steps_never_imports_torch():
    """The store of a learner that owns its parameters only takes publications: its optimizer,
    stepping with torch once it steps, leaves torch unloaded until then (seconds of a process's start)."""
    code = """
import sys
import numpy as np
from gorila.params.rule import UpdateRule
from gorila.params.shard import ParameterShard
from gorila.params.optim import TORCH_FROM
shard = ParameterShard(np.zeros(TORCH_FROM, np.float32), UpdateRule.asynchronous(), "adam", 1e-3)
shard.load_state_dict(shard.state_dict())
before = 'torch' in sys.modules
shard.push(np.ones(TORCH_FROM, np.float32), 0)
print(before, 'torch' in sys.modules, float(shard.state_dict()["params"][0]))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    before, after, param = done.stdout.split()
    assert (before, after) == ("False", "True")  # then the first step steps with torch
    assert float(param) == pytest.approx(-1e-3, rel=1e-3)  # Adam's first step moves by lr
