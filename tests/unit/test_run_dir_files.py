"""A run directory's files are opened without following links out of it, and a damaged or unwritable
directory is refused by name (a ConfigError: exit 2 on the command line) before a run writes there."""

import os

import pytest

from gorila.atomic import write_bytes, write_json
from gorila.errors import ConfigError
from gorila.metrics import RunLogger
from gorila.run_files import check_run_dir

HEADER = "step,time_s,return\n"


def logger(run_dir, **kwargs):
    return RunLogger(run_dir, {"algo": "x"}, ["return"], tensorboard=False, **kwargs)


@pytest.fixture
def outside(tmp_path):
    """A file outside the run directory, which nothing the run does may change."""
    path = tmp_path / "precious.txt"
    path.write_text("keep me\n" * 10 + "no newline at the end")
    return path


def test_a_metrics_csv_linked_out_of_the_run_directory_is_refused_and_its_target_kept(tmp_path, outside):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.csv").symlink_to(outside)
    before = outside.read_bytes()
    with pytest.raises(ConfigError) as refusal:
        logger(run_dir, resume=True, resume_at=1.0)
    assert refusal.value.field == "resume" and "symbolic link" in refusal.value.message
    assert "metrics.csv" in refusal.value.message
    assert outside.read_bytes() == before
    with pytest.raises(ConfigError, match="symbolic link"):
        check_run_dir(run_dir, "resume", resume=True)


def test_an_atomic_write_never_opens_a_link_planted_at_its_temp_name(tmp_path, outside):
    before = outside.read_bytes()
    (tmp_path / "summary.json.tmp").symlink_to(outside)
    write_json(tmp_path / "summary.json", {"a": 1})
    assert outside.read_bytes() == before and (tmp_path / "summary.json").read_text().startswith("{")
    (tmp_path / "config.json").symlink_to(outside)  # the rename replaces the link, not what it names
    write_bytes(tmp_path / "config.json", b"{}")
    assert outside.read_bytes() == before and not (tmp_path / "config.json").is_symlink()


@pytest.mark.parametrize("content, says", [
    (b"\xff\xfe\x00garbage\n\x80\x81\n", "not UTF-8"),
    (b"lorem ipsum dolor\nsit amet\n", "header starts"),
    (HEADER.encode() + b"1,0.5,3\nbanana,split,9\n", "line 3"),
    (HEADER.encode() + b"1,0.5,3\n2,nan,4\n", "line 3"),
    (b"step,time_s\n\x00\x00\x00\n", "line 2 does not start with a step and a time: '\\x00\\x00\\x00'"),
    (HEADER.encode() + b'1,"' + b"x" * 200_000 + b'"\n', "not CSV"),
])
def test_a_damaged_metrics_csv_is_refused_by_name(tmp_path, content, says):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.csv").write_bytes(content)
    for refuse in (lambda: check_run_dir(run_dir, "resume", resume=True),
                   lambda: logger(run_dir, resume=True, resume_at=1.0)):
        with pytest.raises(ConfigError) as refusal:
            refuse()
        assert refusal.value.field == "resume"
        assert str(run_dir / "metrics.csv") in refusal.value.message and says in refusal.value.message
    assert (run_dir / "metrics.csv").read_bytes() == content  # refused, not cut


def test_an_intact_metrics_csv_resumes_as_before(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.csv").write_text(HEADER + "1,0.5,3\n2,1.0,4\n3,1.5,")
    check_run_dir(run_dir, "resume", resume=True)
    with logger(run_dir, resume=True, resume_at=1.0) as log:
        log.log(step=2, row={"return": 5.0}, train_s=1.2)
    assert (run_dir / "metrics.csv").read_text() == HEADER + "1,0.5,3\n2,1.200,5.0\n"


def test_a_read_only_run_directory_or_parent_is_refused_by_name(tmp_path, monkeypatch):
    parent = tmp_path / "parent"
    parent.mkdir()
    (parent / "run").mkdir()
    read_only = {str(parent)}
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: str(path) not in read_only and real_access(path, mode))
    with pytest.raises(ConfigError) as refusal:
        check_run_dir(parent / "new" / "run", "run_dir", resume=False)
    assert refusal.value.field == "run_dir" and f"{parent} is read-only" in refusal.value.message
    read_only = {str(parent / "run")}
    with pytest.raises(ConfigError, match="read-only"):
        check_run_dir(parent / "run", "resume", resume=True)
    check_run_dir(parent / "new", "run_dir", resume=False)  # under a writable one: fine


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_parent_is_refused_for_real(tmp_path):
    tmp_path.chmod(0o555)
    try:
        with pytest.raises(ConfigError, match="read-only"):
            check_run_dir(tmp_path / "run", "run_dir", resume=False)
    finally:
        tmp_path.chmod(0o755)


def test_a_run_directory_under_a_file_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="not a directory"):
        check_run_dir(tmp_path / "file" / "run", "run_dir", resume=False)
