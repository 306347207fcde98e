"""The local runtime's snapshots: objects come back whole (views still views, RNGs where they were,
shared objects joined to this run's), and a snapshot that names other code is refused."""

import os
import pickle
import threading

import numpy as np
import pytest
import torch
from torch import nn

from gorila.errors import CheckpointError
from gorila.nets import FlatParams
from gorila.runtime import snapshot


def _worker(shard) -> dict:
    """A stand-in for a worker: arrays and their views, a network over a flat buffer, RNGs, a lock,
    and a reference to something shared (a shard). (A dict: a snapshot names no test module's class.)"""
    flat = np.arange(6, dtype=np.float32)
    net = nn.Linear(3, 2)
    return {"flat": flat, "parts": [flat[:2], flat[2:]], "net": net, "params": FlatParams(net),
            "rng": np.random.default_rng(5), "generator": torch.Generator().manual_seed(5),
            "lock": threading.Lock(), "shard": shard}


def test_views_tensors_rngs_and_locks_come_back_as_they_were():
    shard, new_shard = object(), object()
    held = _worker(shard)
    held["rng"].random(3), torch.rand(2, generator=held["generator"])  # mid-stream
    back = snapshot.loads(snapshot.dumps(held, {"shard0": shard}), {"shard0": new_shard})
    assert back["shard"] is new_shard  # joined to this run's, not a copy
    back["parts"][1][:] = 9.0  # a view still writes through to its array
    assert back["flat"].tolist() == [0, 1, 9, 9, 9, 9]
    size = held["params"].size
    back["params"].set(np.full(size, 2.0, np.float32))  # the network's tensors view the flat buffer
    assert torch.equal(back["net"].weight, torch.full((2, 3), 2.0))
    assert back["params"].module is back["net"]
    assert back["rng"].random() == held["rng"].random()
    assert torch.equal(torch.rand(3, generator=back["generator"]), torch.rand(3, generator=held["generator"]))
    assert back["lock"].acquire(blocking=False)  # a fresh lock


def test_flat_gradients_come_back_as_views_of_their_buffer():
    net = nn.Linear(3, 1)
    params = FlatParams(net)
    back = snapshot.loads(snapshot.dumps(params, {}), {})
    back.zero_grad()
    back.module(torch.ones(1, 3)).sum().backward()
    assert back.grad().tolist() == [1.0, 1.0, 1.0, 1.0]


class Exploit:
    def __reduce__(self):
        return os.system, ("true",)


def test_a_snapshot_that_names_other_code_is_refused():
    data = pickle.dumps({"worker": Exploit()})
    with pytest.raises(CheckpointError, match="posix.system|os.system"):
        snapshot.loads(data, {})


def test_a_snapshot_may_not_reach_other_code_through_a_trusted_module():
    # GLOBAL opcodes by hand: a dotted name walks attributes (gorila.runtime.snapshot imports
    # pickle), and a name imported into a trusted module is not defined there
    for module, name in ((b"gorila.runtime.snapshot", b"pickle.loads"), (b"gorila.runtime.snapshot", b"pickle"),
                         (b"gorila.envs.vector", b"functools")):
        with pytest.raises(CheckpointError, match="may not name"):
            snapshot.loads(b"c" + module + b"\n" + name + b"\n.", {})
    assert snapshot.loads(b"cgorila.nets.flat\nFlatParams\n.", {}) is FlatParams  # defined there: read


def test_a_snapshot_that_refers_to_what_the_run_lacks_is_refused():
    shard = object()
    data = snapshot.dumps({"shard": shard}, {"shard3": shard})
    with pytest.raises(CheckpointError, match="shard3"):
        snapshot.loads(data, {})


def test_a_thread_is_not_saved():
    thread = threading.Thread(target=lambda: None, name="gorila-prefetch")
    with pytest.raises(pickle.PicklingError, match="gorila-prefetch"):
        snapshot.dumps({"worker": thread}, {})
