"""While Ray starts, the driver works in an empty directory of its own, and goes back to its
directory however the start ends."""

import os

import pytest

from gorila.runtime.ray_cwd import away_from_working_directory, release_empty_directory


def test_ray_starts_in_an_empty_private_directory_and_the_driver_goes_back_whatever_happens(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "numpy.py").write_text("")  # what a run directory might hold
    with away_from_working_directory() as empty:
        assert os.getcwd() == empty != str(tmp_path) and os.listdir(empty) == []
        assert os.stat(empty).st_mode & 0o777 == 0o700
    assert os.getcwd() == str(tmp_path)
    with pytest.raises(KeyboardInterrupt), away_from_working_directory() as again:
        assert again == empty  # one directory a process, while Ray may work there
        raise KeyboardInterrupt
    assert os.getcwd() == str(tmp_path)
    release_empty_directory()
    assert not os.path.exists(empty)
