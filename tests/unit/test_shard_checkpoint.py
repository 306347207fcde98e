"""A shard's state survives a checkpoint file exactly (no pickle, shapes and dtypes intact)."""

import numpy as np

from gorila.checkpoint import load_checkpoint, save_checkpoint
from gorila.params import ServerSpec, UpdateRule, shard_state, split_shard_state


def test_shard_state_round_trips_through_a_checkpoint(tmp_path):
    spec = ServerSpec(UpdateRule.semi_async(aggregate=2), num_shards=2, optimizer="adam", lr=0.01)
    shards = spec.build(np.arange(6, dtype=np.float32))
    for v in range(3):
        for s in shards:
            s.push(np.full(s.size, v + 1.0, np.float32), version=s.version)
    save_checkpoint(tmp_path, shard_state([s.state_dict() for s in shards]), {"note": "x"})
    arrays, meta = load_checkpoint(tmp_path)
    fresh = spec.build(np.zeros(6, np.float32))
    for shard, state in zip(fresh, split_shard_state(arrays, 2)):
        shard.load_state_dict(state)
    for a, b in zip(shards, fresh):
        assert a.version == b.version and a.stats.as_dict() == b.stats.as_dict()
        a.push(np.ones(a.size, np.float32), version=a.version)
        b.push(np.ones(b.size, np.float32), version=b.version)
        assert a.pull()[0].tobytes() == b.pull()[0].tobytes()
    assert meta["note"] == "x"
