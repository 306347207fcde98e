"""The machine's own ceiling for a parallel lstsq map: the same gradient in plain processes.

``gorila bench speedup`` prints each measured speedup next to this limit, taken in the same run:
``m`` bare processes (no Ray, no parameter server, no communication) each compute
:func:`gorila.agents.lstsq.learner.local_gradient` over their ``n / m`` rows, all at once, and
``limit(m) = T(1) / T(m)``. Where cores share floating-point units or memory bandwidth, this is
below ``m``, and no parallel runtime can beat it. For synchronous gradient descent the processes
also meet at a barrier after every gradient (the least any synchronous round must do): waiting
for the slower one, and waking again, cost time that free-running processes never pay::

    limits = map_limits(LstsqConfig(n=1_000_000, d=100), seed=0, counts=[1, 2], rounds=20,
                        synchronized=True)   # {1: 1.0, 2: 1.4}
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from gorila.agents.lstsq.config import LstsqConfig
from gorila.agents.lstsq.learner import local_gradient
from gorila.envs.least_squares import LeastSquares
from gorila.runtime import ONE_THREAD

if TYPE_CHECKING:
    from multiprocessing.queues import Queue
    from multiprocessing.synchronize import Barrier


def _timed_map(cfg: LstsqConfig, seed: int, num_workers: int, worker_id: int, rounds: int, synchronized: bool,
               barrier: Barrier, results: Queue[tuple[float, float]], timeout_s: float) -> None:
    problem = LeastSquares(cfg.n, cfg.d, cfg.noise, cfg.condition, seed)
    x, y = problem.rows(problem.partition(num_workers)[worker_id])
    w: np.ndarray = np.zeros(cfg.d, np.float32)
    scale = np.float32(num_workers / cfg.n)
    local_gradient(x, y, w, scale)  # page in the rows before the clock starts
    barrier.wait(timeout_s)  # all start together
    start = time.monotonic()  # one clock for every process of the machine
    for _ in range(rounds):
        w = w - 1e-3 * local_gradient(x, y, w, scale)
        if synchronized:
            barrier.wait(timeout_s)
    results.put((start, time.monotonic()))


def map_seconds(cfg: LstsqConfig, seed: int, num_workers: int, rounds: int, synchronized: bool = False,
                timeout_s: float = 600.0) -> float:
    """Wall seconds for ``num_workers`` processes to run ``rounds`` local gradients each, at once
    (``synchronized``: all meeting at a barrier after each one)."""
    return max(end - start for start, end in map_intervals(cfg, seed, num_workers, rounds, synchronized, timeout_s))


def start_one_thread(ctx: Any, target: Callable, args: list[tuple]) -> list:
    """One started process of ``ctx`` (a multiprocessing context) per tuple of ``args``, each with
    one BLAS / OpenMP thread: set in the environment they inherit, then restored here."""
    saved = {k: os.environ.get(k) for k in ONE_THREAD}
    os.environ.update(ONE_THREAD)
    try:
        procs = [ctx.Process(target=target, args=a) for a in args]
        for proc in procs:
            proc.start()
        return procs
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def gather_at_once(target: Callable[..., None], args: list[tuple], timeout_s: float) -> list[Any]:
    """What each of ``len(args)`` fresh processes puts on its queue: one spawned process (a clean
    interpreter, one thread: :func:`start_one_thread`) runs ``target(*a, barrier, results, timeout_s)``
    for each tuple ``a``, the processes meeting at ``barrier`` wherever they start something together.
    A process that exits with an error is an error here at once (the others would wait for it at the
    barrier until the timeout), naming the exit codes."""
    ctx = mp.get_context("spawn")  # a clean interpreter: no inherited threads or Ray state
    barrier, results = ctx.Barrier(len(args)), ctx.Queue()
    procs = start_one_thread(ctx, target, [(*a, barrier, results, timeout_s) for a in args])
    gathered: list[Any] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(gathered) < len(procs):
            try:
                gathered.append(results.get(timeout=1.0))
            except queue.Empty:
                failed = [proc.exitcode for proc in procs if proc.exitcode not in (None, 0)]
                if failed or time.monotonic() > deadline:
                    raise RuntimeError(f"{len(procs)} processes at once failed: exit codes {failed}, "
                                       f"{len(gathered)} of {len(procs)} done") from None
    finally:
        for proc in procs:
            if len(gathered) < len(procs):  # failed: kill the ones waiting at the barrier
                proc.kill()
            proc.join(timeout_s)
    return gathered


def map_intervals(cfg: LstsqConfig, seed: int, num_workers: int, rounds: int, synchronized: bool = False,
                  timeout_s: float = 600.0) -> list[tuple[float, float]]:
    """When each of the ``num_workers`` processes of :func:`map_seconds` started and ended its
    rounds, on the machine's monotonic clock."""
    return gather_at_once(_timed_map, [(cfg, seed, num_workers, k, rounds, synchronized) for k in range(num_workers)],
                          timeout_s)


def map_limits(cfg: LstsqConfig, seed: int, counts: list[int], rounds: int,
               synchronized: bool = False) -> dict[int, float]:
    """``T(1) / T(m)`` of the bare map for every ``m`` in ``counts``."""
    seconds = {m: map_seconds(cfg, seed, m, rounds, synchronized) for m in sorted({1, *counts})}
    return {m: seconds[1] / seconds[m] for m in counts}
