"""The ``gorila`` entry drops the current directory from the import path where only Python put it
there, and keeps it where the user named it (``PYTHONPATH=.``, to make an env of a module of theirs)."""

from gorila.entry import drop_working_directory

CWD = "/home/me/run"


def test_the_entries_python_adds_for_the_current_directory_are_dropped():
    # python -m: the directory itself first; python -c: ''; PYTHONPATH "/opt/envs:": /opt/envs and the directory
    path = [CWD, "", "/opt/envs", CWD, "/usr/lib/python3.11"]
    assert drop_working_directory(path, CWD, "/opt/envs:") == ["/opt/envs", "/usr/lib/python3.11"]


def test_a_directory_named_on_purpose_stays():
    path = [CWD, "/usr/lib/python3.11"]
    assert drop_working_directory(path, CWD, ".") == path
    assert drop_working_directory(path, CWD, f"/opt/envs:{CWD}") == path
