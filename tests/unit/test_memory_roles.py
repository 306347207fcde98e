"""``gorila bench memory``'s parts: the role of each process of a run, and the peaks over readings."""

import subprocess
import sys

import pytest

from gorila.bench.memory import Peaks, read_tree, role_of, sample_tree

RAY = "/venv/lib/python3.11/site-packages/ray"


@pytest.mark.parametrize("cmdline, role", [
    (["ray::bundle-0"], "bundle-0"),
    (["ray::bundle-1.run_steps"], "bundle-1"),
    (["ray::gorila-01823fcb-evaluator-3:evaluator-0"], "evaluator-0"),
    (["ray::shard-0", ""], "shard-0"),
    (["ray::IDLE"], "ray:idle_worker"),
    (["ray::DashboardAgent"], "ray:dashboard_agent"),
    (["/venv/bin/python", "-u", f"{RAY}/dashboard/agent.py", "--node-id=f8"], "ray:dashboard_agent"),
    (["/venv/bin/python", "-u", f"{RAY}/_private/runtime_env/agent/main.py"], "ray:runtime_env_agent"),
    ([f"{RAY}/core/src/ray/raylet/raylet", "--raylet_socket_name=x"], "ray:raylet"),
    (["/venv/bin/python", "-u", f"{RAY}/_private/log_monitor.py", "--x"], "ray:log_monitor"),
    (["/venv/bin/python", "/src/gorila/runtime/reaper.py", "12"], "reaper"),
    (["/usr/bin/cat", "-"], "cat"),
])
def test_a_process_is_named_by_its_role(cmdline, role):
    assert role_of(cmdline, is_root=False) == role


def test_the_root_is_the_driver():
    assert role_of(["/venv/bin/python", "-m", "gorila.cli", "train"], is_root=True) == "driver"


def test_peaks_are_of_the_sum_and_of_each_roles_processes_together():
    peaks = Peaks()
    peaks.add([("driver", 10, 5), ("actor-0", 20, 8), ("actor-0", 20, 8)])  # a restart's old and new
    peaks.add([("driver", 30, 9), ("actor-0", 10, 4)])
    assert (peaks.total_rss, peaks.total_pss, peaks.processes) == (50, 21, 3)
    assert peaks.roles == {"driver": (30, 9), "actor-0": (40, 16)}


class FakeProcess:
    """What read_tree asks of a psutil.Process, fixed."""

    def __init__(self, pid, cmdline, rss, pss, children=()):
        self.pid, self._cmdline, self._memory, self._children = pid, cmdline, (rss, pss), list(children)

    def children(self, recursive=False):
        return self._children

    def cmdline(self):
        return self._cmdline

    def memory_full_info(self):
        rss, pss = self._memory
        return type("Memory", (), {"rss": rss, "pss": pss})()


def test_a_process_on_its_way_out_is_left_out_of_a_reading():
    # An exiting process has released its memory and its command line: a row of zeros named "?"
    exiting = FakeProcess(3, [], 0, 0)
    root = FakeProcess(1, ["python", "-m", "gorila"], 300, 200, [FakeProcess(2, ["ray::shard-0"], 90, 50), exiting])
    assert read_tree(root) == [("driver", 300, 200), ("shard-0", 90, 50)]


def test_a_process_tree_is_read_until_its_root_exits():
    # The child touches 64 MiB, says so, and holds it until its stdin (the root's) is closed,
    # which the test does once the tree has been read.
    code = ("import subprocess, sys\n"
            "subprocess.run([sys.executable, '-c', 'import sys; b = b\"x\" * (64 << 20); print(\"ready\", flush=True); "
            "sys.stdin.read()'])")
    root = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert root.stdout is not None and root.stdin is not None
    assert root.stdout.readline() == "ready\n"
    peaks = sample_tree(root, every_s=0.1, timeout_s=60, after_read=root.stdin.close)
    root.stdout.close()
    assert {"driver", "python"} <= peaks.roles.keys()
    assert peaks.roles["python"][1] > 64 << 20 > peaks.roles["driver"][1]  # the child's touched 64 MiB
    assert peaks.processes == 2 and peaks.total_pss > 64 << 20
