"""One live run per run directory: the lock a second run is refused by, and taken over from a dead one."""

import os
import subprocess
import sys

import pytest

from gorila.driver.run_lock import LOCK_NAME, hold_run_dir
from gorila.errors import ConfigError, RunDirLockedError

# Holds RUN_DIR's lock in another process until its stdin closes; prints "held" once it has it.
HOLDER = """
import sys
from gorila.driver.run_lock import hold_run_dir
with hold_run_dir(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
"""


def _holder(run_dir):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(run_dir)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "held\n"
    return proc


def test_a_directory_held_by_a_live_run_is_refused_naming_its_pid(tmp_path):
    holder = _holder(tmp_path / "run")
    try:
        with pytest.raises(RunDirLockedError, match=f"in use by a live run \\(PID {holder.pid}\\)") as refused:
            with hold_run_dir(tmp_path / "run", "resume"):
                pass
        assert isinstance(refused.value, ConfigError) and refused.value.flag == "--resume"  # exit 2
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    lines: list[str] = []
    with hold_run_dir(tmp_path / "run", message=lines.append):  # released at the holder's exit
        assert (tmp_path / "run" / LOCK_NAME).read_text().split()[0] == str(os.getpid())
    assert lines == []  # released cleanly: nothing to take over
    assert (tmp_path / "run" / LOCK_NAME).read_text() == ""


def test_the_lock_of_a_killed_run_is_taken_over_with_a_message(tmp_path):
    holder = _holder(tmp_path / "run")
    holder.kill()  # the kernel releases the lock; the file still names the dead owner
    holder.wait(timeout=30)
    lines: list[str] = []
    with hold_run_dir(tmp_path / "run", message=lines.append):
        pass
    assert len(lines) == 1 and f"taking over the lock of PID {holder.pid}" in lines[0], lines


def test_holding_is_reentrant_within_a_process(tmp_path):
    with hold_run_dir(tmp_path / "run"), hold_run_dir(tmp_path / "run" / "." ):
        assert (tmp_path / "run" / LOCK_NAME).read_text().split()[0] == str(os.getpid())
    with hold_run_dir(tmp_path / "run"):  # and released after the outer block
        pass


@pytest.mark.parametrize("kind", ["symbolic link", "hard link"])
def test_a_lock_that_is_a_link_to_another_file_is_refused_and_that_file_left_as_it_was(tmp_path, kind):
    precious = tmp_path / "precious.txt"
    precious.write_text("the user's own file\n")
    (tmp_path / "run").mkdir()
    if kind == "symbolic link":
        (tmp_path / "run" / LOCK_NAME).symlink_to(precious)
    else:
        os.link(precious, tmp_path / "run" / LOCK_NAME)
    lines: list[str] = []
    with pytest.raises(ConfigError, match=f"{LOCK_NAME} is a {kind}") as refused:
        with hold_run_dir(tmp_path / "run", "resume", lines.append):
            pass
    assert refused.value.flag == "--resume" and lines == []
    assert precious.read_text() == "the user's own file\n"


@pytest.mark.parametrize("make, kind", [(os.mkdir, "a directory"), (os.mkfifo, "not a plain file")])
def test_a_lock_that_is_a_directory_or_a_pipe_is_refused_by_name(tmp_path, make, kind):
    (tmp_path / "run").mkdir()
    make(tmp_path / "run" / LOCK_NAME)
    with pytest.raises(ConfigError, match=f"{LOCK_NAME} is {kind}") as refused:
        with hold_run_dir(tmp_path / "run", "run_dir"):
            pass
    assert refused.value.flag == "--run-dir"
