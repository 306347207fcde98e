import numpy as np
import pytest
import torch
from torch import nn

from gorila.errors import ConfigError
from gorila.losses.dqn import double_q_targets, dqn_loss, q_loss
from gorila.types import Batch

T = torch.tensor


def test_double_q_targets_pick_with_online_and_evaluate_with_target():
    targets = double_q_targets(reward=T([1.0, 2.0, 0.5]), discount=T([0.5, 0.0, 0.5]),
                               next_q_online=T([[3.0, 1.0], [5.0, 0.0], [0.0, 4.0]]),
                               next_q_target=T([[10.0, 20.0], [30.0, 40.0], [7.0, 8.0]]))
    # row 0: online argmax is action 0, target values it 10 (a max over target would say 20)
    # row 1: terminated, no bootstrap; row 2: online argmax 1 -> 8
    assert torch.allclose(targets, T([1.0 + 0.5 * 10.0, 2.0, 0.5 + 0.5 * 8.0]))


def test_double_q_targets_carry_no_gradient():
    online = T([[1.0, 2.0]], requires_grad=True)
    target = T([[3.0, 4.0]], requires_grad=True)
    y = double_q_targets(T([0.0]), T([0.9]), online, target)
    assert not y.requires_grad and y.item() == pytest.approx(3.6)


def test_q_loss_huber_and_mse():
    q, y = T([0.0, 0.0]), T([0.5, 3.0])
    assert q_loss(q, y, "huber").item() == pytest.approx((0.5 * 0.25 + (3.0 - 0.5)) / 2)
    assert q_loss(q, y, "mse").item() == pytest.approx((0.25 + 9.0) / 2)
    # importance weights scale each row's loss
    assert q_loss(q, y, "mse", weights=T([1.0, 0.5])).item() == pytest.approx((0.25 + 0.5 * 9.0) / 2)
    with pytest.raises(ConfigError) as e:
        q_loss(q, y, "l1")
    assert e.value.field == "loss"


def linear(weights):
    net = nn.Linear(1, 2, bias=False)
    with torch.no_grad():
        net.weight.copy_(T(weights))
    return net


def test_dqn_loss_on_a_hand_computed_batch():
    online = linear([[1.0], [2.0]])   # Q(s) = (s, 2s)
    target = linear([[3.0], [1.0]])   # Q'(s) = (3s, s)
    batch = Batch(obs=np.array([[1.0], [2.0]], np.float32), action=np.array([1, 0]),
                  reward=np.array([1.0, 0.0], np.float32), next_obs=np.array([[1.0], [1.0]], np.float32),
                  discount=np.array([0.9, 0.0], np.float32), indices=np.array([0, 1]),
                  weights=np.array([1.0, 0.5], np.float32), policy_version=np.array([0, 0]))
    loss, info = dqn_loss(online, target, batch, kind="huber")
    # q_taken = (2, 2); online picks action 1 at s'=1, target values it 1 -> y = (1 + 0.9, 0)
    # td = (-0.1, -2) -> huber (0.005, 1.5), the second row at half weight
    assert loss.item() == pytest.approx((0.005 + 0.5 * 1.5) / 2)
    assert info["q_mean"] == pytest.approx(2.0) and info["target_mean"] == pytest.approx(0.95)
    np.testing.assert_allclose(info["td_abs"], [0.1, 2.0], rtol=1e-6)
    loss.backward()
    assert online.weight.grad is not None and target.weight.grad is None
