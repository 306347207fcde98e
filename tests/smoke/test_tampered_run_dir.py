"""Row 9 of the fault matrix: ``gorila train --resume`` on a run directory that was damaged or
tampered with says what is wrong, in words, and never loads a pickle."""

import json
import pickle
import shutil
import subprocess
import sys

import pytest

from gorila.cli import main

pytestmark = pytest.mark.smoke

LSTSQ = ("--algo", "lstsq", "--runtime", "local", "--workers", "2", "--mode", "sync", "--n", "2000", "--d", "8")


def gorila(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "gorila.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    # A checkpoint every row and a resume that adds one: two checkpoints, the newest and one before.
    result = gorila("train", *LSTSQ, "--checkpoint-every-s", "0.001", "--run-dir", str(run_dir))
    assert result.returncode == 0, result.stderr
    assert len(list((run_dir / "checkpoints").glob("ckpt-*.json"))) == 2
    return run_dir


@pytest.fixture
def run_dir(finished, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(finished, copy)
    return copy


class Resumed:
    """``gorila train --resume RUN_DIR`` run in this process (a run directory's checks come before
    anything heavy): its exit code and what it wrote on stderr."""

    def __init__(self, run_dir, capsys):
        try:
            self.returncode = main(["train", "--resume", str(run_dir)])
        except SystemExit as exit_:  # argparse's way out, as the command line sees it
            self.returncode = exit_.code
        self.stderr = capsys.readouterr().err


@pytest.fixture
def resume(capsys):
    return lambda run_dir: Resumed(run_dir, capsys)


def newest(run_dir, suffix):
    return sorted((run_dir / "checkpoints").glob(f"ckpt-*{suffix}"))[-1]


@pytest.mark.parametrize("damage, why", [
    ("truncated", "truncated"),
    ("bit-flipped", "fails its sha256 check"),
    ("missing sidecar", "missing"),
    ("edited sidecar", "edited after it was saved"),
])
def test_row9_a_damaged_newest_checkpoint_falls_back_saying_which_and_why(resume, run_dir, damage, why):
    """Row 9 (tampered run directory): truncated, bit-flipped, sidecar missing, sidecar edited."""
    data, sidecar = newest(run_dir, ".safetensors"), newest(run_dir, ".json")
    if damage == "truncated":
        data.write_bytes(data.read_bytes()[:-9])
    elif damage == "bit-flipped":
        raw = bytearray(data.read_bytes())
        raw[len(raw) // 2] ^= 0x10
        data.write_bytes(bytes(raw))
    elif damage == "missing sidecar":
        sidecar.unlink()
    else:
        record = json.loads(sidecar.read_text())
        record["meta"]["updates"] += 1000
        sidecar.write_text(json.dumps(record))
    result = resume(run_dir)
    assert result.returncode == 0, result.stderr
    assert f"skipping a damaged checkpoint: {sidecar.name}: " in result.stderr
    assert why in result.stderr


@pytest.mark.parametrize("content", ["", '{"algo": "lstsq", "run": ', "[1, 2]", '{"algo": "lstsq", "run": 3}'])
def test_row9_an_empty_or_tampered_config_json_is_a_clear_error_with_exit_2(resume, run_dir, content):
    """Row 9: config.json empty, cut short, or not a run's settings."""
    (run_dir / "config.json").write_text(content)
    result = resume(run_dir)
    assert result.returncode == 2, result.stderr
    assert "--resume" in result.stderr and "config.json" in result.stderr
    assert "Traceback" not in result.stderr


def test_row9_an_edited_setting_in_config_json_is_refused_by_name(resume, run_dir):
    """Row 9: a setting edited to a value no flag takes is refused like the flag, exit 2."""
    config = json.loads((run_dir / "config.json").read_text())
    config["lstsq"]["workers"] = -3
    (run_dir / "config.json").write_text(json.dumps(config))
    result = resume(run_dir)
    assert result.returncode == 2 and "--workers" in result.stderr, result.stderr


def test_row9_another_networks_checkpoint_is_said_in_words(resume, run_dir):
    """Row 9: the checkpoints were saved for another network (here: other features, so another size)."""
    config = json.loads((run_dir / "config.json").read_text())
    config["lstsq"]["d"] = 12
    (run_dir / "config.json").write_text(json.dumps(config))
    result = resume(run_dir)
    assert result.returncode == 1
    assert "holds 8 parameters in 1 shard(s), but this run's network has 12 in 1" in result.stderr
    assert "another algorithm, network or --shards" in result.stderr and "Traceback" not in result.stderr


def test_row9_a_cluster_config_json_names_is_joined_only_when_named_again(resume, run_dir):
    """Row 9: a resume joins the Ray cluster of its config.json, which runs its processes and whose
    replies it unpickles, only when --address names one again: refused at once, nothing dialled."""
    config = json.loads((run_dir / "config.json").read_text())
    config["run"].update(runtime="ray", address="203.0.113.9:6379")  # TEST-NET-3: nothing answers there
    (run_dir / "config.json").write_text(json.dumps(config))
    result = resume(run_dir)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "names the Ray cluster at '203.0.113.9:6379'" in result.stderr
    assert "--address '203.0.113.9:6379'" in result.stderr and "--address local" in result.stderr


class _Planted:
    """Unpickling this writes a file: proof that something unpickled it."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_row9_a_planted_pickle_is_never_loaded(resume, run_dir, tmp_path):
    """Row 9: pickles planted as the newest checkpoint (with a sidecar that vouches for them) and
    beside it are refused; the run resumes from the last good one and nothing was unpickled."""
    import hashlib

    marker = tmp_path / "unpickled"
    payload = pickle.dumps(_Planted(marker))
    checkpoints = run_dir / "checkpoints"
    sequence = int(newest(run_dir, ".json").name[5:11]) + 1
    (checkpoints / f"ckpt-{sequence:06d}.safetensors").write_bytes(payload)
    record = json.loads(newest(run_dir, ".json").read_text())
    record.pop("record_sha256", None)
    record.update(sequence=sequence, file=f"ckpt-{sequence:06d}.safetensors", bytes=len(payload),
                  sha256=hashlib.sha256(payload).hexdigest())
    # the planted checkpoint vouches for itself, its record's own checksum included (a checksum, not a signature)
    record["record_sha256"] = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()
    (checkpoints / f"ckpt-{sequence:06d}.json").write_text(json.dumps(record))
    for name in ("model.pkl", "ckpt-999999.pt", "params.npy"):
        (checkpoints / name).write_bytes(payload)
    result = resume(run_dir)
    assert result.returncode == 0, result.stderr
    assert f"ckpt-{sequence:06d}.json: ckpt-{sequence:06d}.safetensors is not valid safetensors" in result.stderr
    assert not marker.exists()
