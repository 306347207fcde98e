"""A checkpoint's sidecar is trusted only as far as it is checked (issue 32, item 6): it must carry
``record_sha256``, every field of its record must have its type and range, and a reader refuses
meta fields and states it cannot use. Each refusal falls back to the checkpoint before, saying why."""

import json

import numpy as np
import pytest

from gorila.checkpoint import _digest, load_checkpoint, save_checkpoint
from gorila.driver.progress import check_run_meta, resumable
from gorila.errors import CheckpointError
from gorila.params import ParameterShard, UpdateRule, shard_state

META = {"env_steps": 1000, "updates": 10, "train_time_s": 12.5, "time_to_target_s": None,
        "train_time_to_target_s": None, "evaluation": {"best_eval_return": 20.0}}


def two_checkpoints(directory, newest_meta=META):
    save_checkpoint(directory, {"params": np.zeros(3, np.float32)}, {**META, "env_steps": 500})
    return save_checkpoint(directory, {"params": np.ones(3, np.float32)}, newest_meta)


def edit_sidecar(sidecar, edit, sign=True):
    """Change the sidecar's record and, with ``sign``, give it a matching record_sha256 (an edit
    made by someone who knows the format), so that only the field checks can catch it."""
    record = json.loads(sidecar.read_text())
    record.pop("record_sha256")
    edit(record)
    if sign:
        record["record_sha256"] = _digest(record)
    sidecar.write_text(json.dumps(record))


def loads_the_older_one(directory, check=None):
    skipped: list[str] = []
    arrays, meta = load_checkpoint(directory, skipped, check=check)
    assert meta["env_steps"] == 500 and not arrays["params"].any()
    assert len(skipped) == 1 and skipped[0].startswith("ckpt-000002.json: ")
    return skipped[0]


def test_a_sidecar_without_record_sha256_is_refused_like_a_bad_checksum(tmp_path):
    sidecar = two_checkpoints(tmp_path)
    edit_sidecar(sidecar, lambda r: r["meta"].update(env_steps=-5), sign=False)
    assert "has no record_sha256" in loads_the_older_one(tmp_path)


@pytest.mark.parametrize("field, value", [("bytes", -1), ("bytes", "12"), ("sequence", 7), ("saved_at", "yesterday"),
                                          ("sha256", "zz"), ("exports", {"model": "../elsewhere.safetensors"}),
                                          ("meta", [1, 2])])
def test_every_record_field_is_checked_for_its_type_and_range(tmp_path, field, value):
    sidecar = two_checkpoints(tmp_path)
    edit_sidecar(sidecar, lambda r: r.update({field: value}))
    assert f"its record's {field!r} is {value!r}" in loads_the_older_one(tmp_path)


@pytest.mark.parametrize("field, value, why", [
    ("env_steps", -5, "meta.env_steps is -5, not a count"),
    ("env_steps", "5", "meta.env_steps is '5', not a count"),
    ("updates", 2.5, "meta.updates is 2.5, not a count"),
    ("train_time_s", float("nan"), "meta.train_time_s is 'nan', not a finite number"),  # JSON spells it "nan"
    ("train_time_s", -1.0, "meta.train_time_s is -1.0, not a number of seconds >= 0"),
    ("time_to_target_s", "soon", "meta.time_to_target_s is 'soon', not a finite number"),
    ("evaluation", {"best_eval_return": float("inf")}, "meta.evaluation.best_eval_return is 'inf'"),
    ("updates", None, "meta.updates is null"),
])
def test_a_run_meta_field_out_of_its_type_or_range_is_refused_falling_back(tmp_path, field, value, why):
    two_checkpoints(tmp_path, {**META, field: value})
    assert why in loads_the_older_one(tmp_path, check=check_run_meta)


def test_a_nan_written_into_a_signed_sidecar_is_refused(tmp_path):
    """NaN as JSON's non-standard literal, which Python's json reads back as a float NaN."""
    sidecar = two_checkpoints(tmp_path)
    edit_sidecar(sidecar, lambda r: r["meta"].update(train_time_s=float("nan")))
    assert "NaN" in sidecar.read_text()
    assert "meta.train_time_s is nan, not a finite number" in loads_the_older_one(tmp_path, check=check_run_meta)


def test_a_saved_shard_state_no_shard_reaches_is_skipped_when_resuming(tmp_path):
    good = ParameterShard(np.zeros(3, np.float32), UpdateRule.asynchronous())
    save_checkpoint(tmp_path, {**shard_state([good.state_dict()]), "params": np.zeros(3, np.float32)},
                    {**META, "env_steps": 500})
    bad = good.state_dict()
    bad["params"][1] = np.nan  # saved broken: its checksums match, its content is unusable
    save_checkpoint(tmp_path, {**shard_state([bad]), "params": np.ones(3, np.float32)}, META)
    assert "shard 0: the saved state has NaN or infinity in 'params'" in loads_the_older_one(
        tmp_path, check=resumable(num_shards=1))


def test_none_usable_names_each_refusal(tmp_path):
    two_checkpoints(tmp_path, {**META, "env_steps": -1})
    with pytest.raises(CheckpointError, match=r"no usable checkpoint .*ckpt-000002.json: meta.env_steps is -1"):
        load_checkpoint(tmp_path, check=lambda arrays, meta: check_run_meta(arrays, {**meta, "updates": -1})
                        if meta["env_steps"] == 500 else check_run_meta(arrays, meta))
