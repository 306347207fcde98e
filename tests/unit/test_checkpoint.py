import errno
import json
import os
from typing import Any

import numpy as np
import pytest

from gorila import atomic, checkpoint
from gorila.checkpoint import CheckpointTimer, load_checkpoint, save_checkpoint
from gorila.errors import CheckpointError, DiskFullError


def _arrays(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "params": rng.standard_normal(37).astype(np.float32),
        "counts": rng.integers(-2**62, 2**62, size=(3, 4), dtype=np.int64),
        "frames": rng.integers(0, 256, size=(2, 84, 84), dtype=np.uint8),
    }


def _corrupt_newest_data(directory):
    newest = sorted(directory.glob("ckpt-*.safetensors"))[-1]
    data = bytearray(newest.read_bytes())
    data[-1] ^= 0xFF
    newest.write_bytes(bytes(data))


def test_round_trip_is_bit_exact(tmp_path):
    arrays = _arrays(0)
    arrays["strided"] = np.arange(20, dtype=np.float64)[::3]  # not contiguous
    save_checkpoint(tmp_path, arrays, {"step": np.int64(1200), "shape": (2, 3), "config_hash": "ab12"})
    loaded, meta = load_checkpoint(tmp_path)
    assert loaded.keys() == arrays.keys()
    for name, value in arrays.items():
        assert loaded[name].dtype == value.dtype
        assert loaded[name].shape == value.shape
        assert loaded[name].tobytes() == np.ascontiguousarray(value).tobytes()
    assert meta == {"step": 1200, "shape": [2, 3], "config_hash": "ab12"}


def test_loads_the_newest_and_keeps_two(tmp_path):
    for step in (1, 2, 3, 4):
        save_checkpoint(tmp_path, _arrays(step), {"step": step})
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["ckpt-000003.json", "ckpt-000003.safetensors",
                     "ckpt-000004.json", "ckpt-000004.safetensors"]
    arrays, meta = load_checkpoint(tmp_path)
    assert meta == {"step": 4}
    assert np.array_equal(arrays["counts"], _arrays(4)["counts"])


def test_keep_one(tmp_path):
    for step in (1, 2):
        save_checkpoint(tmp_path, _arrays(step), {"step": step}, keep=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-000002.json", "ckpt-000002.safetensors"]


def test_corrupted_newest_falls_back_to_previous(tmp_path):
    save_checkpoint(tmp_path, _arrays(1), {"step": 1})
    save_checkpoint(tmp_path, _arrays(2), {"step": 2})
    _corrupt_newest_data(tmp_path)
    arrays, meta = load_checkpoint(tmp_path)
    assert meta == {"step": 1}
    assert np.array_equal(arrays["frames"], _arrays(1)["frames"])


def test_truncated_newest_is_detected(tmp_path):
    save_checkpoint(tmp_path, _arrays(1), {"step": 1})
    save_checkpoint(tmp_path, _arrays(2), {"step": 2})
    newest = tmp_path / "ckpt-000002.safetensors"
    newest.write_bytes(newest.read_bytes()[:100])
    assert load_checkpoint(tmp_path)[1] == {"step": 1}
    (tmp_path / "ckpt-000001.safetensors").write_bytes(b"")
    with pytest.raises(CheckpointError, match="truncated"):
        load_checkpoint(tmp_path)


def test_half_written_save_is_skipped_and_its_leftovers_pruned(tmp_path):
    save_checkpoint(tmp_path, _arrays(1), {"step": 1})
    # A save killed before its sidecar: arrays (and a temp file) but no commit mark.
    (tmp_path / "ckpt-000002.safetensors").write_bytes(b"partial")
    (tmp_path / "ckpt-000002.json.tmp").write_text("{")
    assert load_checkpoint(tmp_path)[1] == {"step": 1}

    save_checkpoint(tmp_path, _arrays(3), {"step": 3})
    names = sorted(p.name for p in tmp_path.iterdir())
    # The sequence never reuses the damaged number, and the leftovers don't count towards keep.
    assert names == ["ckpt-000001.json", "ckpt-000001.safetensors",
                     "ckpt-000003.json", "ckpt-000003.safetensors"]


def test_all_corrupt_raises_naming_each(tmp_path):
    save_checkpoint(tmp_path, _arrays(1), {"step": 1})
    save_checkpoint(tmp_path, _arrays(2), {"step": 2})
    _corrupt_newest_data(tmp_path)
    (tmp_path / "ckpt-000001.json").write_text("{not json")
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(tmp_path)
    assert "ckpt-000002.json" in str(info.value) and "sha256" in str(info.value)
    assert "ckpt-000001.json: unreadable" in str(info.value)


def test_sidecar_pointing_elsewhere_is_refused(tmp_path):
    save_checkpoint(tmp_path, _arrays(1), {"step": 1})
    sidecar = tmp_path / "ckpt-000001.json"
    record = json.loads(sidecar.read_text())
    record["sha256"] = "0" * 64
    sidecar.write_text(json.dumps(record))
    with pytest.raises(CheckpointError, match="sha256"):
        load_checkpoint(tmp_path)


def test_missing_or_empty_directory(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint directory"):
        load_checkpoint(tmp_path / "nope")
    with pytest.raises(CheckpointError, match="no checkpoint in"):
        load_checkpoint(tmp_path)


def test_rejects_non_arrays_and_bad_keep(tmp_path):
    not_arrays: dict[str, Any] = {"w": [1.0, 2.0]}  # as an untyped caller might pass them
    with pytest.raises(TypeError, match="'w'"):
        save_checkpoint(tmp_path, not_arrays, {})
    with pytest.raises(ValueError, match="keep"):
        save_checkpoint(tmp_path, _arrays(0), {}, keep=0)


def test_timer_is_due_once_per_interval():
    now = [100.0]
    timer = CheckpointTimer(every_s=10, clock=lambda: now[0])
    assert not timer.due()
    now[0] = 109.9
    assert not timer.due()
    now[0] = 110.0
    assert timer.due()
    assert not timer.due()  # the interval restarted
    now[0] = 125.0
    assert timer.due()
    with pytest.raises(ValueError, match="every_s"):
        CheckpointTimer(every_s=0)


def test_timer_can_have_its_first_checkpoint_sooner_than_the_interval():
    """A run's first checkpoint comes seconds after it starts, not an interval later: a run that
    ends abruptly in its first minute leaves one to resume from."""
    now = [100.0]
    timer = CheckpointTimer(every_s=60, clock=lambda: now[0], first_s=5)
    now[0] = 104.9
    assert not timer.due()
    now[0] = 105.0
    assert timer.due()
    now[0] = 164.9
    assert not timer.due()  # then at the interval's pace
    now[0] = 165.0
    assert timer.due()


def test_exports_are_written_beside_their_checkpoint_and_pruned_with_it(tmp_path):
    for step in (1, 2, 3):
        weights = {"body.0.weight": np.full((2, 3), step, np.float32)}
        save_checkpoint(tmp_path, _arrays(step), {"step": step}, exports={"model": weights})
    sidecar = json.loads((tmp_path / "ckpt-000003.json").read_text())
    assert sidecar["exports"] == {"model": "ckpt-000003.model.safetensors"}
    assert sorted(p.name for p in tmp_path.glob("*.model.safetensors")) == [
        "ckpt-000002.model.safetensors", "ckpt-000003.model.safetensors"]
    import safetensors.torch

    loaded = safetensors.torch.load_file(tmp_path / "ckpt-000003.model.safetensors")
    assert loaded["body.0.weight"].tolist() == [[3.0] * 3] * 2


class SmallDisk:
    """Writes as :func:`gorila.atomic.write_bytes` does, onto a disk with ``free`` bytes left: a
    write past that fails as a full disk's does (``OSError`` ENOSPC, from the file's write)."""

    def __init__(self, free: int):
        self.free = free

    def write_bytes(self, path, data):
        if len(data) > self.free:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        self.free -= len(data)
        return atomic.write_bytes(path, data)


def test_a_checkpoint_that_finds_no_room_leaves_nothing_and_names_what_it_needed(tmp_path, monkeypatch):
    exports = {"model": {"w": np.ones(1000, np.float32)}}
    save_checkpoint(tmp_path, _arrays(0), {"step": 1}, exports=exports)
    kept = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    disk = SmallDisk(free=16_000)  # the next arrays (14.5 KB) fit, their export (4 KB) not
    monkeypatch.setattr(checkpoint, "write_bytes", disk.write_bytes)
    with pytest.raises(DiskFullError, match=r"no room for checkpoint 2 in .*: its files need 18\.\d KB") as full:
        save_checkpoint(tmp_path, _arrays(1), {"step": 2}, exports=exports)
    assert full.value.errno == errno.ENOSPC and "The checkpoints before it are whole" in str(full.value)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == kept  # no orphan arrays, the last one whole
    skipped: list[str] = []
    assert load_checkpoint(tmp_path, skipped)[1] == {"step": 1} and skipped == []
