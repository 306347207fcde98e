"""A shard checks what an update leaves, not only what a push brings: a round
whose step would make parameters or optimizer state non-finite is rolled back and counted; a
saved state no shard could reach is refused."""

import numpy as np
import pytest

from gorila.errors import CheckpointError
from gorila.params import ParameterShard, UpdateRule
from gorila.params.optim import OPTIMIZERS

pytestmark = pytest.mark.timeout(60)

SIZE = 8
HUGE = np.full(SIZE, 3e38, np.float32)  # finite: the push itself passes every check


def shard(optimizer: str, rule=None, lr=10.0) -> ParameterShard:
    return ParameterShard(np.linspace(-1, 1, SIZE, dtype=np.float32), rule or UpdateRule.asynchronous(),
                          optimizer=optimizer, lr=lr)


def saved(s: ParameterShard) -> dict[str, bytes]:
    """What must not change: parameters, pending sum and optimizer state, bit for bit."""
    return {k: v.tobytes() for k, v in s.state_dict().items() if k in ("params", "pending") or k.startswith("optim.")}


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_a_huge_finite_gradient_is_rolled_back_leaving_params_and_state_unchanged(optimizer):
    s = shard(optimizer)
    s.push(np.full(SIZE, 0.5, np.float32), version=0)  # some state to keep
    before = saved(s)
    result = s.push(HUGE, version=1)
    assert saved(s) == before
    assert s.stats.updates_rolled_back == 1 and result.reason is None
    assert s.version == 2 and result.applied  # the round ended: the version moves on
    # The shard is not stuck: the next ordinary push is applied.
    s.push(np.full(SIZE, 0.5, np.float32), version=2)
    assert saved(s)["params"] != before["params"] and np.isfinite(s.pull()[0]).all()
    assert s.stats.updates_rolled_back == 1


def test_two_finite_pushes_whose_aggregate_overflows_are_rolled_back():
    """Each push is finite and their mean would be too, but their float32 sum is infinite."""
    s = shard("sgd", UpdateRule(aggregate=2, count_within=3, accept_within=5), lr=0.1)
    before = saved(s)
    s.push(HUGE, version=0, worker_id=0)
    s.push(HUGE, version=0, worker_id=1)
    assert s.version == 1 and s.stats.updates_rolled_back == 1
    assert {k: v for k, v in saved(s).items() if k != "pending"} == {k: v for k, v in before.items() if k != "pending"}
    assert not s.state_dict()["pending"].any()  # the round is over: nothing of it stays pending
    s.push(np.ones(SIZE, np.float32), version=1, worker_id=0)
    s.push(np.ones(SIZE, np.float32), version=1, worker_id=1)
    np.testing.assert_allclose(s.pull()[0], np.linspace(-1, 1, SIZE, dtype=np.float32) - 0.1, rtol=1e-6)


def test_a_checkpoint_of_the_counters_before_updates_rolled_back_still_loads():
    s = shard("sgd")
    s.push(np.ones(SIZE, np.float32), version=0)
    state = s.state_dict()
    state["stats"] = state["stats"][:-1]  # as saved before the counter existed
    fresh = shard("sgd")
    fresh.load_state_dict(state)
    assert fresh.stats.updates == 1 and fresh.stats.updates_rolled_back == 0


@pytest.mark.parametrize("what, edit", [
    ("version", lambda st: st["counters"].__setitem__(0, -3)),
    ("params", lambda st: st["params"].__setitem__(2, np.nan)),
    ("stats", lambda st: st["stats"].__setitem__(0, -1)),
    ("pending", lambda st: st["pending"].__setitem__(0, np.nan)),
    ("optim.v", lambda st: st["optim.v"].__setitem__(0, np.inf)),
])
def test_a_state_no_shard_could_reach_is_refused_and_nothing_changes(what, edit):
    s = shard("adam")
    s.push(np.ones(SIZE, np.float32), version=0)
    state = {k: v.copy() for k, v in s.state_dict().items()}
    edit(state)
    target = shard("adam", lr=0.5)
    before = saved(target)
    with pytest.raises(CheckpointError, match="shard 0: the saved state has"):
        target.load_state_dict(state)
    with pytest.raises(CheckpointError):
        target.restore(state, epoch=1)
    assert saved(target) == before and target.version == 0 and target.epoch == 0
