"""Minibatches copied to a learner's GPU ahead of their use. Runs where torch sees a GPU."""

import numpy as np
import pytest
import torch

from gorila.learners.device_copy import DEVICE_FIELDS, DeviceCopy
from gorila.learners.q_learner import QLearner
from gorila.learners.target import TargetUpdate
from gorila.nets import FlatParams
from gorila.nets.q import VectorQNetwork
from gorila.types import Batch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU that torch can see")


def frames(n, seed):
    """A minibatch of uint8 frames, as Atari replay holds them."""
    rng = np.random.default_rng(seed)
    return Batch(rng.integers(0, 256, (n, 4, 84, 84), dtype=np.uint8), rng.integers(0, 6, n),
                 rng.standard_normal(n).astype(np.float32), rng.integers(0, 256, (n, 4, 84, 84), dtype=np.uint8),
                 rng.random(n).astype(np.float32), np.arange(n), rng.random(n).astype(np.float32),
                 np.full(n, seed, np.int64))


def same(batch, taken):
    return all(torch.equal(getattr(taken, name).cpu(), torch.from_numpy(getattr(batch, name)))
               for name in DEVICE_FIELDS)


def test_staged_minibatches_arrive_whole_even_as_their_host_buffers_are_refilled():
    copy = DeviceCopy("cuda")
    batches = [frames(64, seed) for seed in range(6)]
    copy.stage(batches[0])
    taken = []
    for k in range(6):
        if k + 1 < 6:
            copy.stage(batches[k + 1])   # refills the other slot while batch k may still be copying
        taken.append(copy.take(batches[k]))
    torch.cuda.synchronize()
    assert all(same(b, t) for b, t in zip(batches, taken))
    # the copies' fields are tensors, where a Batch's type names the arrays replay holds
    assert all(torch.as_tensor(t.obs).device.type == "cuda" and isinstance(t.indices, np.ndarray) for t in taken)
    assert copy.report() == {"batches_copied_ahead": 6, "batches_copied_when_used": 0}


def test_a_minibatch_that_was_not_staged_is_copied_when_taken_and_the_staged_one_stays_next():
    copy = DeviceCopy("cuda")
    foreseen, other = frames(8, 1), frames(8, 2)
    copy.stage(foreseen)
    assert same(other, copy.take(other))
    assert same(foreseen, copy.take(foreseen))
    assert copy.report() == {"batches_copied_ahead": 1, "batches_copied_when_used": 1}


def network():
    torch.manual_seed(0)
    return VectorQNetwork(3, (16,), 2)


def test_the_gradient_is_the_same_whether_the_minibatch_was_copied_ahead_or_when_used():
    rng = np.random.default_rng(0)
    n = 32
    batch = Batch(rng.standard_normal((n, 3)).astype(np.float32), rng.integers(0, 2, n),
                  rng.standard_normal(n).astype(np.float32), rng.standard_normal((n, 3)).astype(np.float32),
                  np.full(n, 0.9, np.float32), np.arange(n), np.ones(n, np.float32), np.zeros(n, np.int64))
    params = FlatParams(network()).get()
    grads = []
    for ahead in (True, False):
        learner = QLearner(network, loss="huber", target="double", target_update=TargetUpdate.hard(100),
                           outlier_k=None, max_grad_norm=None, device="cuda", copy_ahead=ahead)
        assert learner.stages_ahead is ahead
        learner.stage(batch)
        grad, _ = learner.gradient(params, 0, batch)
        assert grad is not None
        grads.append(grad.copy())
    assert np.abs(grads[0]).sum() > 0
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("vtrace", [True, False])
def test_impalas_gradient_on_the_gpu_is_its_gradient_on_the_cpu(vtrace):
    import functools

    from gorila.agents.impala.loss import ImpalaLoss
    from gorila.nets.actor_critic_env import make_network
    from gorila.types import Segment

    network_fn = functools.partial(make_network, "CartPole-v1", (16,), False, 0)
    g = np.random.default_rng(1)
    T, N = 5, 3
    truncated = np.zeros((T, N), bool)
    truncated[2, 1] = True  # a cut episode: its final observation is valued on the device too
    segment = Segment(obs=g.normal(size=(T, N, 4)).astype(np.float32), actions=g.integers(2, size=(T, N)),
                      rewards=g.normal(size=(T, N)).astype(np.float32), discounts=np.full((T, N), 0.9, np.float32),
                      truncated=truncated, final_obs=g.normal(size=(1, 4)).astype(np.float32),
                      valid=np.ones((T, N), bool), log_probs=np.log(np.full((T, N), 0.4, np.float32)),
                      policy_version=np.zeros((T, N), np.int64), last_obs=g.normal(size=(N, 4)).astype(np.float32))
    loss = ImpalaLoss(vtrace=vtrace, max_grad_norm=40.0)
    grads = {}
    for device in ("cpu", "cuda"):
        net = network_fn().to(device)
        grads[device], _ = loss.gradients(net, segment, FlatParams(net))
    assert np.abs(grads["cpu"]).sum() > 0
    np.testing.assert_allclose(grads["cuda"], grads["cpu"], rtol=1e-4, atol=1e-6)
