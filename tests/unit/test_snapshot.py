"""The local runtime's snapshots are data: objects come back whole (views still views, RNGs where
they were, shared objects joined to this run's), state is loaded into the objects this run builds,
code comes only from this run, and a snapshot that names code is refused without running it."""

import json
import os
import pickle
import struct
import threading

import numpy as np
import pytest
import safetensors.numpy
import torch
from torch import nn

from gorila import atomic
from gorila.agents.a3c.loss import A3CLoss
from gorila.agents.impala.loss import ImpalaLoss
from gorila.agents.ppo.loss import PPOLoss
from gorila.errors import CheckpointError, SnapshotRefusedError
from gorila.nets import FlatParams
from gorila.runtime import snapshot
from gorila.types import Segment


def _worker(shard) -> dict:
    """A stand-in for a worker: arrays and their views, a network over a flat buffer, RNGs, a lock,
    and a reference to something shared (a shard)."""
    flat = np.arange(6, dtype=np.float32)
    net = nn.Linear(3, 2)
    return {"flat": flat, "parts": [flat[:2], flat[2:]], "net": net, "params": FlatParams(net),
            "rng": np.random.default_rng(5), "generator": torch.Generator().manual_seed(5),
            "lock": threading.Lock(), "shard": shard}


def _round_trip(value, shared=None, fresh=None, new_shared=None):
    data = snapshot.dumps({"part": value}, shared or {})
    return snapshot.loads(data, new_shared if new_shared is not None else shared or {}).read("part", fresh=fresh)


def test_views_tensors_rngs_and_locks_come_back_as_they_were():
    shard, new_shard = object(), object()
    held = _worker(shard)
    held["rng"].random(3), torch.rand(2, generator=held["generator"])  # mid-stream
    back = _round_trip(held, {"shard0": shard}, new_shared={"shard0": new_shard})
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
    params = FlatParams(nn.Linear(3, 1))
    back = _round_trip(params)
    back.zero_grad()
    back.module(torch.ones(1, 3)).sum().backward()
    assert back.grad().tolist() == [1.0, 1.0, 1.0, 1.0]


def test_state_is_loaded_into_the_objects_this_run_built():
    layer = nn.Linear(3, 2)
    saved, fresh = FlatParams(nn.Linear(3, 2)), FlatParams(layer)
    saved.set(np.arange(saved.size, dtype=np.float32))
    buffer = layer.weight.data_ptr()
    back = _round_trip({"params": saved}, fresh={"params": fresh})["params"]
    # the same objects, the same memory
    assert back is fresh and back.module is layer and layer.weight.data_ptr() == buffer
    assert back.get().tolist() == list(range(saved.size))
    back.zero_grad()
    back.module(torch.ones(1, 3)).sum().backward()  # its gradient views still see backward's sums
    assert back.grad().sum() == 2 * 4


def test_code_is_never_saved_and_comes_from_this_run():
    saved = {"step": os.system, "factory": np.add}
    data = snapshot.dumps({"part": saved}, {})
    assert b"system" not in data and b"add" not in data
    mine = {"step": len, "factory": np.maximum}
    assert snapshot.loads(data, {}).read("part", fresh=mine) == mine
    with pytest.raises(CheckpointError, match="marks code there, and this run builds none"):
        snapshot.loads(data, {}).read("part")


def _crafted(table, part=None) -> bytes:
    """A snapshot written by hand, as someone who shares a run directory might."""
    tree = json.dumps({"format": "gorila-snapshot/2", "parts": {"part": part or {"$": "ref", "i": 0}},
                       "table": table}).encode()
    return struct.pack("<Q", len(tree)) + tree + safetensors.numpy.save({"m0": np.zeros(1, np.uint8)})


@pytest.mark.parametrize("name", ["posix:system", "builtins:eval", "gymnasium.envs.registration:load_env_creator",
                                  "gorila.atomic:write_bytes", "gorila.atomic:os", "subprocess:Popen",
                                  "gorila.runtime.snapshot:_Decoder.decode"])
def test_a_snapshot_that_names_code_is_refused(name):
    data = _crafted([{"$": "object", "cls": name, "state": {}}])
    with pytest.raises(CheckpointError, match="may not create|names a class"):
        snapshot.loads(data, {}).read("part")


def test_a_pickle_is_never_read(tmp_path):
    marker = tmp_path / "written"

    class Payload:
        def __reduce__(self):
            return atomic.write_bytes, (marker, b"x")

    with pytest.raises(CheckpointError, match="cannot be read|not a gorila-snapshot"):
        snapshot.loads(pickle.dumps({"workers": Payload()}), {})
    assert not marker.exists()


@pytest.mark.parametrize("node", [{"$": "array", "mem": 0, "offset": 0, "shape": [4], "strides": [8],
                                   "dtype": "|O", "writeable": True},
                                  {"$": "dict", "kind": "defaultdict", "factory": "eval", "k": [], "v": []},
                                  {"$": "npgen", "bit": "os", "state": {}}])
def test_a_snapshot_that_asks_for_what_it_may_not_hold_is_refused(node):
    with pytest.raises(CheckpointError):
        snapshot.loads(_crafted([node]), {}).read("part")


def test_a_snapshot_that_refers_to_what_the_run_lacks_is_refused():
    shard = object()
    data = snapshot.dumps({"part": {"shard": shard}}, {"shard3": shard})
    with pytest.raises(CheckpointError, match="shard3"):
        snapshot.loads(data, {}).read("part")


def test_a_class_saved_under_the_name_it_had_before_it_moved_is_read_where_it_lives_now():
    segment = Segment(obs=np.arange(6.0).reshape(3, 2, 1), actions=np.zeros((3, 2), np.int64),
                      rewards=np.ones((3, 2), np.float32), discounts=np.ones((3, 2), np.float32),
                      truncated=np.zeros((3, 2), bool), final_obs=np.zeros((0, 1)), valid=np.ones((3, 2), bool),
                      log_probs=np.zeros((3, 2), np.float32), policy_version=np.full((3, 2), 7, np.int64),
                      last_obs=np.zeros((2, 1)))
    data = snapshot.dumps({"part": [segment]}, {})
    (length,) = struct.unpack("<Q", data[:8])
    tree = data[8:8 + length].replace(b'"gorila.types:Segment"', b'"gorila.trajectory.segment:Segment"')
    assert tree != data[8:8 + length]  # the snapshot named the class, and now names it as it was named before
    (back,) = snapshot.loads(struct.pack("<Q", len(tree)) + tree + data[8 + length:], {}).read("part")
    assert type(back) is Segment and np.array_equal(back.obs, segment.obs) and back.oldest_version == 7



@pytest.mark.parametrize("loss, old", [(A3CLoss(gamma=0.9), "gorila.losses.a3c:A3CLoss"),
                                       (ImpalaLoss(rho_bar=2.0), "gorila.losses.impala:ImpalaLoss"),
                                       (PPOLoss(clip=0.1), "gorila.losses.ppo_targets:PPOLoss")])
def test_a_loss_saved_before_its_algorithm_had_a_folder_is_read_from_there(loss, old):
    """A run saved while the algorithms' losses lived in ``losses/`` holds their old names."""
    data = snapshot.dumps({"part": [loss]}, {})
    (length,) = struct.unpack("<Q", data[:8])
    now = f"{type(loss).__module__}:{type(loss).__qualname__}".encode()
    tree = data[8:8 + length].replace(b'"' + now + b'"', b'"' + old.encode() + b'"')
    assert tree != data[8:8 + length]
    (back,) = snapshot.loads(struct.pack("<Q", len(tree)) + tree + data[8 + length:], {}).read("part")
    assert back == loss

def test_a_thread_is_not_saved():
    thread = threading.Thread(target=lambda: None, name="gorila-prefetch")
    with pytest.raises(TypeError, match="Thread"):
        snapshot.dumps({"worker": {"prefetch": thread}}, {})


def test_a_snapshot_larger_than_the_runs_processes_could_need_is_refused_unread():
    """A run's snapshot with rows nothing refers to added, 3 MB of them (a crafted one held 145 MB,
    2.3 GB once parsed), past what 2 processes could need: the local runtime's restore refuses it
    before the tree is parsed; as it was, it reads back."""
    from gorila.params import ServerSpec, UpdateRule
    from gorila.runtime.local import LocalRuntime

    runtime = LocalRuntime()
    runtime.plan(2)
    runtime.start_shards(ServerSpec(rule=UpdateRule.asynchronous()), np.zeros(3, np.float32))
    data = runtime.snapshot({"step": 7})
    assert runtime.restore(data) == {"step": 7}
    (length,) = struct.unpack_from("<Q", data)
    tree = json.loads(data[8:8 + length])
    tree["table"] += [{"$": "object", "cls": "builtins:object", "state": {"pad": "x" * 1000}}] * 3_000
    text = json.dumps(tree).encode()
    crafted = struct.pack("<Q", len(text)) + text + data[8 + length:]
    with pytest.raises(SnapshotRefusedError, match=r"has a tree of 3\.\d MB, more than this run's 2 processes could "
                                                   r"need \(2\.1 MB: 1\.0 MB each\)") as refused:
        runtime.restore(crafted)
    assert refused.value.flag == "--resume"
