"""``gorila bench memory``: the peak memory of a ``gorila train`` run, per role and summed, beside
the limit measured in the same run: a bare embedded ``ray.init`` plus one idle Ray process
(:mod:`gorila.runtime.bare_ray`), sampled the same way.

Each command runs as a child; every ``--every-s`` its process tree (the driver, the embedded Ray's
processes, the Ray workers) is read. A process's role is its title (``ray::bundle-0``,
``ray::shard-0``, ``ray::evaluator-0``: see :func:`gorila.runtime.ray_processes.titled`) or the Ray
helper it is (``ray:raylet``, ``ray:dashboard_agent``, ...). PSS (proportional set size) splits each
shared page among the processes that map it, so summed PSS is what the run adds to the machine;
summed RSS counts shared pages (torch's libraries) once per process::

    peaks = sample_tree(subprocess.Popen([...]), every_s=0.5)
    peaks.total_pss, peaks.roles["bundle-0"]          # bytes at the peak of the sum; (rss, pss) per role
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]  # psutil ships no type hints

from gorila import validate
from gorila.bench.report import bench_dir, write_bench_json
from gorila.cliargs import command_parser

MIB = 2 ** 20
#: Ray's own helper processes, by a part of their command line (the agents' before they retitle themselves too).
RAY_HELPERS = (("gcs_server", "ray:gcs_server"), ("raylet/raylet", "ray:raylet"),
               ("dashboard/dashboard.py", "ray:dashboard"), ("ray::DashboardAgent", "ray:dashboard_agent"),
               ("dashboard/agent.py", "ray:dashboard_agent"), ("ray::RuntimeEnvAgent", "ray:runtime_env_agent"),
               ("runtime_env/agent/main.py", "ray:runtime_env_agent"),
               ("autoscaler/_private/monitor.py", "ray:monitor"),
               ("log_monitor.py", "ray:log_monitor"), ("default_worker.py", "ray:worker_starting"),
               ("ray::IDLE", "ray:idle_worker"), ("gorila/runtime/reaper.py", "reaper"))


def role_of(cmdline: list[str], is_root: bool) -> str:
    """The role of a process from its command line (a Ray worker's is its title: ``ray::NAME``,
    ``ray::NAME.method`` during a call, ``ray::ACTOR_NAME:NAME`` while it is built)."""
    if is_root:
        return "driver"
    line = " ".join(cmdline)
    for part, role in RAY_HELPERS:
        if part in line:
            return role
    if cmdline and cmdline[0].startswith("ray::"):
        return cmdline[0][len("ray::"):].split(".")[0].split()[0].rpartition(":")[2]
    return os.path.basename(cmdline[0]) if cmdline else "?"


@dataclass
class Peaks:
    """Peak memory seen over samples: of the sum over all processes, and per role (a role's peak is
    that of the sum over its processes at one sample, so a restarted process is not counted twice)."""

    total_rss: int = 0
    total_pss: int = 0
    processes: int = 0  # at the peak of the summed PSS
    roles: dict[str, tuple[int, int]] = field(default_factory=dict)  # role: (peak rss, peak pss)

    def add(self, sample: list[tuple[str, int, int]]) -> None:
        """One reading of the tree: (role, rss, pss) per process."""
        by_role: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for role, rss, pss in sample:
            by_role[role][0] += rss
            by_role[role][1] += pss
        for role, (rss, pss) in by_role.items():
            old = self.roles.get(role, (0, 0))
            self.roles[role] = (max(old[0], rss), max(old[1], pss))
        pss = sum(p for _, _, p in sample)
        if pss > self.total_pss:
            self.total_pss, self.processes = pss, len(sample)
        self.total_rss = max(self.total_rss, sum(r for _, r, _ in sample))


def read_tree(root: psutil.Process) -> list[tuple[str, int, int]]:
    """(role, rss, pss) of ``root`` and every process below it; those gone meanwhile, or on their
    way out (their memory already released, their command line empty), are left out."""
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []
    out = []
    for proc in procs:
        try:
            info = proc.memory_full_info()
            if info.rss == 0:  # exiting: nothing of it is left to count, nor a name to count it under
                continue
            out.append((role_of(proc.cmdline(), proc.pid == root.pid), info.rss, info.pss))
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return out


def sample_tree(child: subprocess.Popen[Any], every_s: float, timeout_s: float = 600.0,
                after_read: Callable[[], None] | None = None) -> Peaks:
    """Read ``child``'s process tree every ``every_s`` seconds until it exits; its peaks. A child
    still running after ``timeout_s`` is killed and is an error. ``after_read`` is called after
    each reading (a caller that holds the child until it has been read releases it there)."""
    root, peaks = psutil.Process(child.pid), Peaks()
    deadline = time.monotonic() + timeout_s
    while child.poll() is None:
        if time.monotonic() > deadline:
            child.kill()
            command = child.args if isinstance(child.args, list) else [child.args]  # one string: the whole command
            raise RuntimeError(f"{' '.join(map(str, command))} ran past {timeout_s:.0f} s")
        peaks.add(read_tree(root))
        if after_read is not None:
            after_read()
        try:
            child.wait(timeout=every_s)
        except subprocess.TimeoutExpired:
            pass
    return peaks


def measure(argv: list[str], every_s: float) -> tuple[Peaks, str]:
    """Run ``python argv`` and sample it; its peaks and the end of its stderr."""
    with tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen([sys.executable, *argv], stdout=subprocess.DEVNULL, stderr=err, text=True)
        peaks = sample_tree(child, every_s)
        err.seek(0)
        tail = err.read()[-2000:]
    if child.returncode != 0:
        raise RuntimeError(f"python {' '.join(argv)} failed: {tail}")
    return peaks, tail


def _rows(which: str, peaks: Peaks) -> list[dict]:
    return [{"which": which, "role": role, "peak_rss_mib": rss / MIB, "peak_pss_mib": pss / MIB}
            for role, (rss, pss) in sorted(peaks.roles.items(), key=lambda kv: -kv[1][1])]


def main(argv: list[str]) -> int:
    parser = command_parser("gorila bench memory", __doc__)
    parser.add_argument("--algo", default="dqn", help="the algorithm whose `gorila train` is measured")
    parser.add_argument("--time-limit-s", type=float, default=30.0, help="the run's --time-limit-s")
    parser.add_argument("--hold-s", type=float, default=5.0, help="how long the bare Ray limit stays up")
    parser.add_argument("--every-s", type=float, default=0.5, help="seconds between readings")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory for bench.json (default: bench-out/memory-<time>)")
    args, train_flags = parser.parse_known_args(argv)
    validate.number("time_limit_s", args.time_limit_s, low=0.0, low_open=True)
    validate.number("hold_s", args.hold_s, low=0.0)
    validate.number("every_s", args.every_s, low=0.0, low_open=True)
    out = bench_dir(args.out, "memory")
    command = ["--algo", args.algo, "--time-limit-s", str(args.time_limit_s), *train_flags]
    limit, _ = measure(["-m", "gorila.runtime.bare_ray", "--torch", "0", "--plain", "1", "--hold-s", str(args.hold_s)],
                       args.every_s)
    with tempfile.TemporaryDirectory() as tmp:
        run, _ = measure(["-m", "gorila.cli", "train", *command, "--run-dir", str(Path(tmp) / "run")], args.every_s)
    print(f"gorila bench memory: gorila train {' '.join(command)}; peaks over readings every {args.every_s} s")
    print(f"  {'role':<28} {'RSS MiB':>8} {'PSS MiB':>8}")
    for row in _rows("run", run):
        print(f"  {row['role']:<28} {row['peak_rss_mib']:8.0f} {row['peak_pss_mib']:8.0f}")
    print(f"  {'sum (' + str(run.processes) + ' processes)':<28} {run.total_rss / MIB:8.0f} {run.total_pss / MIB:8.0f}")
    print(f"  {'limit: ray.init + idle actor':<28} {limit.total_rss / MIB:8.0f} {limit.total_pss / MIB:8.0f}"
          f"   ratio {run.total_pss / limit.total_pss:.2f}")
    write_bench_json(out, "memory", vars(args) | {"train_flags": train_flags},
                     _rows("run", run) + _rows("limit", limit),
                     peak_rss_mib=run.total_rss / MIB, peak_pss_mib=run.total_pss / MIB, processes=run.processes,
                     limit_peak_rss_mib=limit.total_rss / MIB, limit_peak_pss_mib=limit.total_pss / MIB,
                     ratio=run.total_pss / limit.total_pss)
    return 0
