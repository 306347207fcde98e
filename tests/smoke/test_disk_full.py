"""A run whose disk fills: ``gorila train`` ends with a named error saying what found no room,
what it needed and what is free, with its last checkpoints whole and no part-written one beside
them; ``--resume`` continues once there is room again. The disk is a small tmpfs (mounting one
needs root; elsewhere the test is skipped, and tests/unit/test_checkpoint.py's small disk stands
in for it)."""

import json
import os
import subprocess

import pytest

from gorila.checkpoint import load_checkpoint
from gorila.cli import main

pytestmark = pytest.mark.smoke

RUN = ["--algo", "a3c", "--runtime", "local", "--env", "CartPole-v1", "--no-stop-at-target"]


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    yield disk
    subprocess.run(["umount", str(disk)], check=True)


def gorila(capsys, *argv):
    code = main(list(argv))
    return code, capsys.readouterr().err


def test_a_full_disk_is_named_leaves_the_last_checkpoint_whole_and_resume_goes_on_once_there_is_room(
        small_disk, capsys):
    run_dir = small_disk / "run"
    code, err = gorila(capsys, "train", *RUN, "--time-limit-s", "1", "--checkpoint-every-s", "0.3",
                       "--run-dir", str(run_dir))
    assert code == 0, err
    info = os.statvfs(small_disk)
    filler = small_disk / "filler"
    filler.write_bytes(bytes(info.f_bavail * info.f_frsize - 200_000))  # room for rows, not for a checkpoint

    code, err = gorila(capsys, "train", "--resume", str(run_dir), "--time-limit-s", "2")
    assert code == 1 and "Traceback" not in err
    assert "DiskFullError: no room for checkpoint " in err and "KB are free there" in err, err
    assert f"continue it with gorila train --resume {run_dir}" in err
    checkpoints = run_dir / "checkpoints"
    for data in checkpoints.glob("ckpt-*.safetensors"):  # every one with its sidecar: none part-written
        assert (checkpoints / f"{data.name.split('.')[0]}.json").exists(), data
    skipped: list[str] = []
    load_checkpoint(checkpoints, skipped)
    assert skipped == []
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["stop_reason"] == "disk_full"

    filler.unlink()
    code, err = gorila(capsys, "train", "--resume", str(run_dir), "--time-limit-s", "1")
    assert code == 0, err
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "finished"
