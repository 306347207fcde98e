import copy

import numpy as np
import pytest
import torch
from torch import nn

from gorila.nets import FlatParams


def _net(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def _concat(tensors) -> np.ndarray:
    return torch.cat([t.detach().reshape(-1) for t in tensors]).numpy()


def test_get_is_a_copy_in_parameter_order_and_set_loads_every_parameter():
    net = _net()
    before = _concat(net.parameters())
    flat = FlatParams(net)
    w = flat.get()
    np.testing.assert_array_equal(w, before)  # making the buffer keeps the values
    w[:] = 0.0
    assert not np.array_equal(flat.get(), w)
    target = np.arange(flat.size, dtype=np.float32)
    flat.set(target)
    np.testing.assert_array_equal(_concat(net.parameters()), target)
    np.testing.assert_array_equal(flat.get(), target)
    with pytest.raises(ValueError, match="flat vector"):
        flat.set(np.zeros(flat.size + 1, np.float32))


def test_parameters_are_views_of_one_buffer_that_a_second_flat_params_shares():
    net = _net()
    flat = FlatParams(net)
    first = net[0]
    assert isinstance(first, nn.Linear)
    with torch.no_grad():
        first.bias.fill_(7.0)
    assert set(flat.get()[flat.slices()["0.bias"]]) == {7.0}
    again = FlatParams(net)
    again.set(np.ones(flat.size, np.float32))
    np.testing.assert_array_equal(flat.get(), np.ones(flat.size, np.float32))


def test_backward_writes_into_the_flat_gradient_buffer():
    net = _net()
    flat = FlatParams(net)
    x = torch.randn(5, 3)
    expected = torch.autograd.grad(net(x).square().sum(), list(net.parameters()))
    flat.zero_grad()
    net(x).square().sum().backward()
    grad = flat.grad()
    np.testing.assert_allclose(grad, _concat(expected), rtol=1e-6)
    assert flat.grad() is grad  # no copy: the same buffer every call
    net(x).square().sum().backward()  # accumulates in place, as .grad does
    np.testing.assert_allclose(grad, 2 * _concat(expected), rtol=1e-6)
    flat.zero_grad()
    assert not grad.any()


def test_grad_reads_replaced_or_missing_grads_and_zero_grad_reattaches_them():
    net = _net()
    flat = FlatParams(net)
    x = torch.randn(5, 3)
    assert not flat.grad().any()  # no backward yet: zeros
    net.zero_grad(set_to_none=True)
    net(x).sum().backward()
    expected = _concat(p.grad for p in net.parameters())
    np.testing.assert_allclose(flat.grad(), expected, rtol=1e-6)
    net[2].weight.grad = None
    assert not flat.grad()[flat.slices()["2.weight"]].any()
    flat.zero_grad()
    net(x).sum().backward()
    np.testing.assert_allclose(flat.grad(), expected, rtol=1e-6)


def test_clip_grad_norm_matches_torch():
    net, twin = _net(), _net()
    flat = FlatParams(net)
    x = torch.randn(5, 3)
    flat.zero_grad()
    net(x).square().sum().backward()
    twin(x).square().sum().backward()
    norm = float(nn.utils.clip_grad_norm_(twin.parameters(), 0.5))
    assert norm > 0.5
    flat.clip_grad_norm_(0.5)
    np.testing.assert_allclose(flat.grad(), _concat(p.grad for p in twin.parameters()), rtol=1e-5)
    before = flat.grad().copy()
    flat.clip_grad_norm_(1e6)  # under the limit: unchanged
    np.testing.assert_array_equal(flat.grad(), before)


def test_a_module_trains_with_a_torch_optimizer_as_it_would_without_the_buffers():
    net, twin = _net(), _net()
    flat = FlatParams(net)
    optimizer = torch.optim.Adagrad(net.parameters(), lr=0.1)
    twin_optimizer = torch.optim.Adagrad(twin.parameters(), lr=0.1)
    x, y = torch.randn(16, 3), torch.randn(16, 2)
    for _ in range(10):
        flat.zero_grad()
        (net(x) - y).square().mean().backward()
        optimizer.step()
        twin_optimizer.zero_grad()
        (twin(x) - y).square().mean().backward()
        twin_optimizer.step()
    np.testing.assert_allclose(flat.get(), _concat(twin.parameters()), rtol=1e-5, atol=1e-6)
    assert not np.allclose(flat.get(), _concat(_net().parameters()))  # it did train
    copied = copy.deepcopy(net)
    flat.set(np.zeros(flat.size, np.float32))
    assert all(p.abs().sum() > 0 for p in copied.parameters())  # the copy has parameters of its own


def test_non_float32_parameters_are_refused():
    with pytest.raises(ValueError, match="float32"):
        FlatParams(nn.Linear(2, 2).double())


def test_state_dict_names_the_parameters_of_a_flat_vector():
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    flat = FlatParams(net)
    w = np.arange(flat.size, dtype=np.float32)
    state = flat.state_dict(w)
    fresh = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    fresh.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    np.testing.assert_array_equal(torch.cat([p.detach().flatten() for p in fresh.parameters()]).numpy(), w)
    assert all(v.base is None for v in state.values())  # each owns its memory, as safetensors needs
