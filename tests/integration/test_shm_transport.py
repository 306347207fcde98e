"""The same-node fast path on real Ray: bit-identical to Ray calls, safeguards kept, nothing left behind."""

import copy
import gc
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np
import pytest

from gorila.params import ServerSpec, UpdateRule

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

SIZE = 10_001  # two shards of unequal length


@pytest.fixture
def runtime(ray_local):
    from gorila.runtime.ray_runtime import RayRuntime

    rt = RayRuntime()
    rt.plan(4)
    yield rt
    rt.shutdown()


def _clients(server, count):
    """One client per worker, each with its own copy of the endpoints, as each worker process gets."""
    return [copy.deepcopy(server).client(worker_id=k) for k in range(count)]


def _grads(seed, rounds, workers):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(SIZE).astype(np.float32) for _ in range(workers)] for _ in range(rounds)]


def _transports(clients):
    return {e.transport for c in clients for e in c.endpoints}


def test_async_pushes_match_ray_calls_bit_for_bit(runtime):
    # max_staleness=1 with three workers pushing in turn: counted, counted, then rejected as stale.
    spec = ServerSpec(UpdateRule.asynchronous(max_staleness=1), num_shards=2, optimizer="adam", lr=1e-2)
    init = np.linspace(-1, 1, SIZE, dtype=np.float32)
    fast_shards, ray_shards = runtime.start_shards(spec, init), runtime.start_shards(spec, init)
    fast = _clients(fast_shards.server, 3)
    slow = _clients(ray_shards.ray_call_server(), 3)
    for c in fast + slow:
        c.params()
    for round_grads in _grads(0, 6, 3):
        for f, s, grad in zip(fast, slow, round_grads):
            assert f.push(grad) == s.push(grad)
            assert np.array_equal(f.params(), s.params()) and f.versions == s.versions
    assert _transports(fast) == {"shm"} and _transports(slow) == {"ray"}
    assert fast[0].outcomes == slow[0].outcomes and fast[2].outcomes["rejected"] > 0
    assert fast_shards.stats() == ray_shards.stats()
    fast_state, ray_state = fast_shards.state_dict(), ray_shards.state_dict()
    assert fast_state.keys() == ray_state.keys()
    for key in fast_state:
        assert np.array_equal(fast_state[key], ray_state[key]), key


def test_synchronous_barrier_matches_ray_calls_bit_for_bit(runtime):
    spec = ServerSpec(UpdateRule.synchronous(num_workers=2), num_shards=2, optimizer="sgd", lr=0.1)
    init = np.zeros(SIZE, np.float32)
    fast_shards, ray_shards = runtime.start_shards(spec, init), runtime.start_shards(spec, init)
    fast = _clients(fast_shards.server, 2)
    slow = _clients(ray_shards.ray_call_server(), 2)
    with ThreadPoolExecutor(2) as pool:  # each push waits at the barrier for the other worker's
        for version, round_grads in enumerate(_grads(1, 5, 2), start=1):
            for clients in (fast, slow):
                for c in clients:
                    c.params()
                futures = [pool.submit(c.push, g) for c, g in zip(clients, round_grads)]
                for f in futures:
                    assert f.result(timeout=60).refreshed
                assert all(c.versions == [version, version] for c in clients)
            expected = -0.1 * np.mean([g for g in round_grads], axis=0)
            for f_client, s_client in zip(fast, slow):
                assert np.array_equal(f_client.params(), s_client.params())
            assert np.array_equal(fast[0].params(), fast[1].params())
            assert version > 1 or np.array_equal(fast[0].params(), expected)
    assert _transports(fast) == {"shm"}
    assert fast_shards.stats() == ray_shards.stats()


def test_a_version_wait_is_answered_by_the_shard_when_fast_path_pushes_make_the_version(runtime):
    spec = ServerSpec(UpdateRule.synchronous(num_workers=1), num_shards=2, optimizer="sgd", lr=0.1)
    shards = runtime.start_shards(spec, np.zeros(SIZE, np.float32))
    waiter, pusher = _clients(shards.server, 2)
    assert waiter.wait_version(1, wait_s=0.2) == 0  # none came within its wait: the version as it is
    pending = [e.wait_version(3, 60.0) for e in waiter.endpoints]  # sent before the pushes
    for grad in _grads(2, 3, 1):
        pusher.params()
        pusher.push(grad[0])
    assert [p.result(30.0) for p in pending] == [3, 3]
    assert _transports([pusher]) == {"shm"} and waiter.versions == [-1, -1]  # the waiter pulled nothing


def test_a_nonfinite_gradient_is_rejected_through_the_fast_path(runtime):
    spec = ServerSpec(UpdateRule.asynchronous(), num_shards=2, optimizer="momentum", lr=0.1)
    shards = runtime.start_shards(spec, np.ones(SIZE, np.float32))
    client, = _clients(shards.server, 1)
    client.params()
    client.push(np.ones(SIZE, np.float32))
    before = shards.state_dict()
    grad = np.ones(SIZE, np.float32)
    grad[[3, SIZE - 2]] = np.nan, -np.inf  # one bad value in each shard
    result = client.push(grad)
    assert result.outcomes == ("rejected", "rejected") and not result.applied
    assert _transports([client]) == {"shm"}
    after = shards.state_dict()
    for key in ("params", "pending", "counters", "optim.velocity"):
        for shard in range(2):
            assert np.array_equal(after[f"shard{shard}.{key}"], before[f"shard{shard}.{key}"]), key
    assert [s.pushes_rejected_nonfinite for s in shards.stats()] == [1, 1]


def _gorila_mappings() -> list[str]:
    with open("/proc/self/maps") as maps:
        return [line for line in maps if "memfd:gorila-shard" in line]


def test_nothing_is_left_after_shutdown(ray_local):
    from gorila.runtime.ray_runtime import RayRuntime

    gc.collect()
    mapped_before = _gorila_mappings()  # other tests' clients may still be collected later
    rt = RayRuntime()
    rt.plan(2)
    spec = ServerSpec(UpdateRule.asynchronous(), num_shards=2)
    shards = rt.start_shards(spec, np.zeros(SIZE, np.float32))
    client = shards.server.client()
    client.params()
    client.push(np.ones(SIZE, np.float32))
    socket_dirs = [os.path.dirname(e.fast_path.path) for e in shards.server.endpoints]
    assert all(os.path.isdir(d) for d in socket_dirs)
    assert len(_gorila_mappings()) == len(mapped_before) + 2
    rt.shutdown()
    gc.collect()
    assert not any(os.path.exists(d) for d in socket_dirs)
    assert _gorila_mappings() == mapped_before
    assert [e.transport for e in shards.server.endpoints] == ["ray", "ray"]


def test_endpoints_travel_by_actor_name_and_find_their_shard(runtime):
    """A restartable worker's creation arguments hold no actor handle (ray-project/ray#53727):
    an endpoint pickles to its shard's name and looks the shard up where it is unpickled."""
    import pickle

    spec = ServerSpec(rule=UpdateRule.asynchronous(), num_shards=2, optimizer="sgd", lr=1.0)
    shards = runtime.start_shards(spec, np.arange(6, dtype=np.float32))
    for k, endpoint in enumerate(shards.ray_call_server().endpoints):
        travelled = pickle.loads(pickle.dumps(endpoint))
        assert travelled.handle._handle is None  # nothing but the name went through
        params, version = travelled.pull().result(30)
        assert version == 0 and params.tolist() == [3.0 * k, 3.0 * k + 1, 3.0 * k + 2]


def test_an_owning_learners_publications_through_the_slot_match_ray_calls(runtime):
    """``--server learner``: the learner's parameters, counters and (at a flush) optimizer state
    reach a store on its node through the fast path exactly as through Ray calls."""
    from gorila.params.owned import Publication, owned_server

    spec = ServerSpec(UpdateRule.asynchronous(), num_shards=2, optimizer="rmsprop", lr=1e-2)
    init = np.linspace(-1, 1, SIZE, dtype=np.float32)
    fast_store, ray_store = runtime.start_shards(spec, init), runtime.start_shards(spec, init)
    every_update = Publication(every_updates=1, every_s=0.0, state_every_s=600.0)
    owners = [owned_server(copy.deepcopy(store), spec, every_update)
              for store in (fast_store.server, ray_store.ray_call_server())]
    for endpoint in owners[0].endpoints:
        endpoint.connect()
    clients = [owner.client(worker_id=0) for owner in owners]
    for round_grads in _grads(2, 5, 1):
        for c in clients:
            c.params()
            c.push(round_grads[0])
    assert [e.store.transport for e in owners[0].endpoints] == ["shm", "shm"]
    assert [e.store.transport for e in owners[1].endpoints] == ["ray", "ray"]
    for owner in owners:
        for endpoint in owner.endpoints:
            assert endpoint.publications >= 1  # one per update, unless the last is still on its way
            endpoint.flush()  # the optimizer state, through Ray on both
    fast_state, ray_state = fast_store.state_dict(), ray_store.state_dict()
    assert fast_state.keys() == ray_state.keys() and fast_state["shard0.counters"][0] == 5
    for key in (k for k in fast_state if not k.endswith(".stats")):
        assert np.array_equal(fast_state[key], ray_state[key]), key
    # The bytes a store took in count the publications sent, which a slow store may see fewer of.
    assert [replace(s, bytes_in=0) for s in fast_store.stats()] == [replace(s, bytes_in=0) for s in ray_store.stats()]
