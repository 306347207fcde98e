"""A driver keeps no view of Ray's object store: the arrays of a reply are its own as they arrive
(a view freed once the cluster has died ends the driver without a word: Ray exits with status 1)."""

import numpy as np
import pytest

from gorila.params import ServerSpec, UpdateRule

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def test_the_shards_state_reaches_the_driver_in_its_own_memory(ray_runtime):
    spec = ServerSpec(UpdateRule.asynchronous(), num_shards=1, optimizer="rmsprop", lr=1e-3)
    shards = ray_runtime.start_shards(spec, np.ones(40_000, np.float32))  # a state over Ray's 100 KB inline limit
    state = shards.state_dict()
    assert state["shard0.params"].nbytes == 160_000
    for name, array in state.items():
        assert array.flags.writeable and array.flags.owndata, name
    np.testing.assert_array_equal(state["shard0.params"], 1.0)


def test_a_reply_in_one_of_the_runs_processes_is_not_copied_again(ray_local):
    """Only the driver outlives its cluster: the run's processes keep Ray's view (a sample crossing
    nodes is not copied once more)."""

    @ray_local.remote(num_cpus=0)
    class Caller:
        def reply_is_a_view(self) -> bool:
            from gorila.runtime.ray_calls import RayPending

            reply = RayPending(ray_local.put(np.ones(40_000, np.float32)), "a put").result(60.0)
            return not reply.flags.writeable

    caller = Caller.remote()
    assert ray_local.get(caller.reply_is_a_view.remote(), timeout=120)
    ray_local.kill(caller)


def test_owned_copies_read_only_arrays_and_keeps_the_rest():
    from gorila.runtime.ray_calls import owned

    viewed = np.frombuffer(np.arange(4, dtype=np.float32).tobytes(), dtype=np.float32)  # read-only, as Ray's
    mine = np.zeros(3)
    reply = owned({"a": viewed, "b": [viewed, (mine, 7)], "c": "text"})
    assert reply["a"].flags.writeable and not np.shares_memory(reply["a"], viewed)
    np.testing.assert_array_equal(reply["a"], viewed)
    assert reply["b"][1][0] is mine and reply["b"][1][1] == 7 and reply["c"] == "text"
    assert reply["b"][0].flags.writeable
