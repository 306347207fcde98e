"""A damaged or hostile run directory (local runtime, CartPole A3C): ``checkpoints/`` deleted under a
running run, a corrupt best checkpoint, a truncated, edited or linked ``config.json`` under ``gorila
eval``, and ``gorila train --resume`` of a directory whose ``metrics.csv`` is damaged or a link."""

import json
import os
import shutil

import numpy as np
import pytest

import gorila
from gorila.checkpoint import load_checkpoint, save_checkpoint
from gorila.cli import main

RUN = dict(runtime="local", total_steps=60_000, eval_episodes=2, eval_every_s=0.1, checkpoint_every_s=0.3, seed=1,
           time_limit_s=20)


@pytest.fixture(scope="module")
def deleted_mid_run(tmp_path_factory):
    """A run whose ``checkpoints/`` is deleted once it has a best checkpoint, and which then stops."""
    run_dir = tmp_path_factory.mktemp("damaged") / "run"

    def delete_once_best(row):
        if any((run_dir / "checkpoints" / "best").glob("ckpt-*.json")):
            shutil.rmtree(run_dir / "checkpoints")
            return False  # stop here: no later evaluation saves a best one again
        return None

    summary = gorila.train("a3c", run_dir=run_dir, callback=delete_once_best, **RUN)
    assert summary["stop_reason"] == "callback", summary["stop_reason"]
    return run_dir, summary


@pytest.fixture
def run_dir(deleted_mid_run, tmp_path):
    return shutil.copytree(deleted_mid_run[0], tmp_path / "run", symlinks=True)


def command(capsys, argv):
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_deleting_checkpoints_mid_run_leaves_a_best_checkpoint_that_is_there(deleted_mid_run):
    run_dir, summary = deleted_mid_run
    best = summary["best_checkpoint"]
    assert best is not None and (run_dir / best["path"]).is_file()
    assert json.loads((run_dir / "summary.json").read_text())["best_checkpoint"] == best
    assert gorila.load_policy(run_dir).meta["version"] == best["version"]


def test_eval_falls_back_from_a_corrupt_best_checkpoint_to_the_last_good_one_and_says_so(run_dir, capsys):
    (data,) = (run_dir / "checkpoints" / "best").glob("ckpt-*[0-9].safetensors")
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0x10
    data.write_bytes(bytes(raw))
    code, out, err = command(capsys, ["eval", str(run_dir), "--episodes", "1"])
    assert code == 0, err
    report = json.loads(out)
    assert report["checkpoint"] == "last" and "best checkpoint is damaged" in report["checkpoint_fallback"]
    assert "the last good one is played" in err and "sha256" in err


def reseal_with(directory, value):
    """The newest checkpoint of ``directory`` saved again, checksums and all, with its first
    parameter ``value``: a file edited by someone who sealed it again."""
    arrays, meta = load_checkpoint(directory)
    arrays["shard0.params"] = arrays["shard0.params"].copy()
    arrays["shard0.params"][0] = value
    save_checkpoint(directory, arrays, meta, keep=1)


def test_eval_falls_back_from_a_best_checkpoint_of_nan_parameters_and_says_so(run_dir, capsys):
    reseal_with(run_dir / "checkpoints" / "best", np.nan)
    code, out, err = command(capsys, ["eval", str(run_dir), "--episodes", "1"])
    assert code == 0, err
    report = json.loads(out)
    assert report["checkpoint"] == "last" and "best checkpoint is damaged" in report["checkpoint_fallback"]
    assert "1 of its" in err and "parameters are NaN or infinite" in err


@pytest.mark.parametrize("value", [np.inf, -np.inf])
def test_eval_refuses_a_run_whose_every_checkpoint_has_infinite_parameters(run_dir, capsys, value):
    reseal_with(run_dir / "checkpoints" / "best", value)
    reseal_with(run_dir / "checkpoints", value)
    code, out, err = command(capsys, ["eval", str(run_dir), "--episodes", "1"])
    assert code == 2 and out == ""
    assert "gorila eval: error: RUN_DIR: no usable checkpoint" in err and "NaN or infinite" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("damage", ["truncated", "not a run", "unknown setting", "wrong type", "link", "not UTF-8"])
def test_eval_refuses_a_damaged_config_json_by_name(run_dir, tmp_path, capsys, damage):
    path = run_dir / "config.json"
    text = path.read_text()
    config = json.loads(text)
    if damage == "truncated":
        path.write_text(text[: len(text) // 2])
    elif damage == "not a run":
        path.write_text(json.dumps({"algo": ["a3c"]}))
    elif damage == "unknown setting":
        config["run"]["no_such_setting"] = 1
        path.write_text(json.dumps(config))
    elif damage == "wrong type":
        config["a3c"]["hidden"] = "wide"
        path.write_text(json.dumps(config))
    elif damage == "link":
        (tmp_path / "elsewhere.json").write_text(text)
        path.unlink()
        path.symlink_to(tmp_path / "elsewhere.json")
    else:
        path.write_bytes(b"\xff" + text.encode())
    code, out, err = command(capsys, ["eval", str(run_dir), "--episodes", "1"])
    assert code == 2 and out == ""
    assert err.startswith("gorila eval: error: RUN_DIR: ") and "config.json" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("damage", ["garbage", "not UTF-8", "link"])
def test_resume_refuses_a_damaged_metrics_csv_by_name_and_writes_nothing(run_dir, tmp_path, capsys, damage):
    csv = run_dir / "metrics.csv"
    outside = tmp_path / "outside.csv"
    outside.write_bytes(csv.read_bytes()[:-5])  # a half-written last line the resume would cut
    if damage == "garbage":
        csv.write_bytes(b"PK\x03\x04 this is no CSV\n\x01\x02,\x03\n")
    elif damage == "not UTF-8":
        csv.write_bytes(csv.read_bytes() + b"\xff\xfe\n")
    else:
        csv.unlink()
        csv.symlink_to(outside)
    before = {p: p.read_bytes() for p in (*run_dir.rglob("*"), outside) if p.is_file()}
    code, _, err = command(capsys, ["train", "--resume", str(run_dir)])
    assert code == 2 and err.startswith("gorila train: error: --resume: ") and "metrics.csv" in err
    assert {p: p.read_bytes() for p in (*run_dir.rglob("*"), outside) if p.is_file()} == before


@pytest.mark.parametrize("where", ["under a file", "a file", "read-only"])
def test_eval_names_a_video_directory_it_cannot_write_before_playing(run_dir, tmp_path, capsys, where):
    (tmp_path / "a-file").write_text("")
    video = {"under a file": tmp_path / "a-file" / "videos", "a file": tmp_path / "a-file",
             "read-only": tmp_path / "read-only" / "videos"}[where]
    if where == "read-only":
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only directories")
        (tmp_path / "read-only").mkdir(mode=0o500)
    code, out, err = command(capsys, ["eval", str(run_dir), "--episodes", "1", "--video", str(video)])
    assert code == 2 and out == "" and err.startswith(f"gorila eval: error: --video: {video} cannot be written"), err
