"""``gorila train`` on the embedded Ray under a limited address space (``ulimit -v``, ``prlimit --as``):
Ray maps its object store into every process, so its store is sized to the limit and the run goes
on; a limit too small for Ray is refused at once, naming it and what to do. (Ray's default store,
30 % of the machine's memory, crashed its raylet at a limit of 8 GiB: ``mmap failed``.)"""

import json
import resource
import subprocess
import sys

import pytest

pytestmark = pytest.mark.smoke

GIB = 1 << 30


def gorila_limited_to(gib, *args, timeout):
    def limit():  # in the child, before it runs Python: as `prlimit --as` does
        resource.setrlimit(resource.RLIMIT_AS, (int(gib * GIB), int(gib * GIB)))

    return subprocess.run([sys.executable, "-m", "gorila", "train", "--algo", "a3c", "--env", "CartPole-v1",
                           "--runtime", "ray", *args], capture_output=True, text=True, timeout=timeout,
                          preexec_fn=limit)


def test_a_limit_too_small_for_ray_is_refused_at_once_naming_it(tmp_path):
    result = gorila_limited_to(2, "--run-dir", str(tmp_path / "run"), timeout=60)
    assert result.returncode == 1 and "Traceback" not in result.stderr and "mmap failed" not in result.stderr
    assert ("SchedulingError: Ray cannot start here: this process is limited to 2.0 GiB of address space "
            "(ulimit -v, prlimit --as)") in result.stderr, result.stderr[-2000:]
    assert "Raise the limit (ulimit -v unlimited) or train in this process (--runtime local)" in result.stderr


@pytest.mark.heavy
def test_a_run_on_ray_under_a_limit_of_8_gib_trains(tmp_path):
    result = gorila_limited_to(8, "--time-limit-s", "2", "--no-stop-at-target", "--run-dir", str(tmp_path / "run"),
                               timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["env_steps"] > 0
