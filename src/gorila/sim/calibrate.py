"""``gorila simulate --calibrate``: measure this machine's costs for the simulator.

* **compute**: the real workers' gradients (:class:`~gorila.agents.lstsq.learner.LstsqWorker`,
  :class:`~gorila.agents.a3c.learner.A3CWorker` and :class:`~gorila.agents.impala.learner.ImpalaLearner`
  on a batch of its actor's segments, built from their algorithms' plans as a run builds them), timed
  in ``k`` processes computing at once for ``k`` = 1 and the machine's CPUs, so the samples carry
  what concurrent workers share (cores, caches, memory bandwidth);
* **apply**: :meth:`ParameterShard.push` of a gradient in process, per optimizer and size (the
  fresh parameters copied into the reply included);
* **transport**: push+pull round trips through the same-node fast path of the Ray runtime
  (:func:`gorila.bench.ps.round_trips`) against payload size, less the apply time, fitted to
  ``2 * (latency + bytes / bandwidth)``.

::

    calibration = calibrate(seconds=3.0)   # about a minute on 2 cores
    calibration.save(Path("calibration.json"))
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from gorila.bench.machine_limit import start_one_thread
from gorila.bench.report import machine
from gorila.params import ParameterShard, ServerSpec, UpdateRule
from gorila.sim.calibration import Calibration, Workload
from gorila.types import Segment

if TYPE_CHECKING:
    from multiprocessing.queues import Queue
    from multiprocessing.synchronize import Barrier

    from gorila.core import Worker
    from gorila.driver.plan import Plan


class LstsqWorkload(TypedDict):
    """The least-squares problem's settings (``LstsqConfig(**LSTSQ)``)."""

    n: int
    d: int
    condition: float


# The lstsq workload of gorila bench speedup's defaults, so that its runs can be predicted.
LSTSQ: LstsqWorkload = {"n": 25_000, "d": 400, "condition": 100.0}
SIZES = (1_000, 30_000, 300_000, 1_687_206)  # parameters: a small MLP ... the Nature CNN
OPTIMIZERS = ("sgd", "rmsprop", "adagrad", "adam")


def _worker(algo: str, workers: int, worker_id: int) -> tuple[Worker, Plan, Any]:
    """Worker ``worker_id`` of ``workers``, built from the algorithm's plan on in-process shards,
    its plan, and what it learns from when that is not its own: lstsq's and A3C's worker (None),
    IMPALA's learner (``--server process``: it pushes) and a batch of segments its plan's actor collected."""
    from gorila.agents.rl_config import RLConfig
    from gorila.config import RunConfig
    from gorila.runtime.local import LocalServices, LocalShards

    run = RunConfig(algo=algo, mode="async", runtime="local", server="process")
    rl = RLConfig(env="CartPole-v1", device="cpu")
    if algo == "lstsq":
        from gorila.agents.lstsq.builder import make_plan as make_lstsq_plan
        from gorila.agents.lstsq.config import LstsqConfig

        plan = make_lstsq_plan(run, LstsqConfig(workers=workers, **LSTSQ))
    elif algo == "impala":
        from gorila.agents.impala.builder import make_plan as make_impala_plan
        from gorila.agents.impala.config import ImpalaConfig

        plan = make_impala_plan(run, ImpalaConfig(learners=workers), rl)
    else:
        from gorila.agents.a3c.builder import make_plan
        from gorila.agents.a3c.config import A3CConfig

        plan = make_plan(run, A3CConfig(workers=workers), rl)
    shards = LocalShards(plan.spec, plan.initial_params(), 60.0)
    services = {s.name: LocalServices([s.bound(shards.server)(k) for k in range(s.count)]).endpoints()
                for s in plan.services}
    *actors, pusher = plan.groups(services)  # the group that pushes: the learners come after the actors
    batch = None
    if algo == "impala":
        actor: Any = actors[0].factory(0, shards.server)  # a SegmentActor
        batch = Segment.concatenate([actor.collect() for _ in range(plan.config["batch_size"])])
    return pusher.factory(worker_id, shards.server), plan, batch


def _gradient_timer(algo: str, worker: Any, batch: Any) -> Callable[[], float]:
    """Seconds of one gradient of the real worker: its ``step`` without the push. ``worker`` is
    an ``LstsqWorker``, an ``A3CWorker`` or an ``ImpalaLearner``, as ``algo`` says: the timer calls
    their own methods (IMPALA's loss on a batch of segments its plan's actor collected)."""
    if algo == "lstsq":
        def lstsq() -> float:
            w = worker.client.params()
            t = time.perf_counter()
            worker.gradient(w)
            return time.perf_counter() - t
        return lstsq
    if algo == "impala":
        def impala() -> float:
            t = time.perf_counter()
            worker.flat.set(worker.client.params())
            worker.loss.gradients(worker.net, batch, worker.flat)
            return time.perf_counter() - t
        return impala

    def a3c() -> float:
        t = time.perf_counter()
        worker.refresh()
        rollout = worker.collect()
        worker.loss.gradients(worker.net, worker.target_net, rollout, worker.flat)
        return time.perf_counter() - t
    return a3c


def _timed_gradients(algo: str, workers: int, worker_id: int, seconds: float, barrier: Barrier,
                     results: Queue[list[float]]) -> None:
    import torch

    torch.set_num_threads(1)  # as in every gorila worker: the processes are the parallelism
    worker, _, batch = _worker(algo, workers, worker_id)
    timer = _gradient_timer(algo, worker, batch)
    for _ in range(3):  # warm-up: page in the rows, first allocations
        timer()
    barrier.wait(120)
    samples: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        samples.append(timer())
    results.put(samples)


def compute_samples(algo: str, concurrent: int, seconds: float) -> list[float]:
    """Gradient times of ``concurrent`` workers computing at once, all of their samples."""
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(concurrent), ctx.Queue()
    procs = start_one_thread(ctx, _timed_gradients,
                             [(algo, concurrent, k, seconds, barrier, results) for k in range(concurrent)])
    try:
        return [t for _ in procs for t in results.get(timeout=seconds + 300)]
    finally:
        for proc in procs:
            proc.join(60)
            if proc.is_alive():
                proc.kill()


def workload(algo: str, cpus: int, seconds: float) -> Workload:
    _, plan, _ = _worker(algo, 1, 0)
    steps = LSTSQ["n"] if algo == "lstsq" else plan.config["envs_per_actor"] * plan.config["unroll_length"]
    if algo == "impala":
        steps *= plan.config["batch_size"]  # segments a gradient learns from
    compute = {k: tuple(compute_samples(algo, k, seconds)) for k in sorted({1, cpus})}
    return Workload(algo=algo, params=int(plan.initial_params().size), optimizer=plan.spec.optimizer,
                    env_steps_per_gradient=float(steps), divides_data=algo == "lstsq", pipelined=algo != "lstsq",
                    compute_s=compute)


def apply_seconds(optimizer: str, size: int, repeats: int = 50) -> float:
    """Median seconds of one in-process push of ``size`` parameters, applied at once, on one
    thread as in a shard process (Ray holds its workers to one)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    shard = ParameterShard(np.zeros(size, np.float32), UpdateRule.asynchronous(), optimizer=optimizer, lr=1e-3)
    grad = np.full(size, 1e-3, np.float32)
    times = []
    try:
        for _ in range(repeats + 3):
            t = time.perf_counter()
            shard.push(grad, shard.version)
            times.append(time.perf_counter() - t)
    finally:
        torch.set_num_threads(threads)
    return float(np.median(times[3:]))


def _line(x: list[float], y: list[float]) -> tuple[float, float]:
    """Intercept and slope of the line through ``(x, y)`` with the least *relative* squared error
    (points spanning 4 kB to 7 MB each count alike), both clipped above zero."""
    ys = np.maximum(np.asarray(y, float), 1e-9)
    slope, intercept = np.polyfit(np.asarray(x, float), ys, 1, w=1 / ys)
    return max(float(intercept), 0.0), max(float(slope), 1e-15)


def transport_fit(trips: list[tuple[int, float]], sgd_apply_s: dict[int, float]) -> tuple[float, float]:
    """``(fixed seconds, seconds per byte)`` of a push+pull round trip's wire: the shard applied
    each pushed gradient (sgd) within the round trip, so the wire is the rest. Where an
    in-process apply time measured longer than a whole round trip (a busy moment on a shared
    machine), the round trips are fitted whole, apply included."""
    wire = [(nbytes, rt - sgd_apply_s[nbytes // 4]) for nbytes, rt in trips]
    if min(t for _, t in wire) <= 0:
        wire = list(trips)
    return _line([b for b, _ in wire], [t for _, t in wire])


def transport_round_trips(sizes: tuple[int, ...], rounds: int) -> list[tuple[int, float]]:
    """``(bytes, seconds)``: median push+pull round trips through the same-node fast path."""
    from gorila.bench.ps import round_trips
    from gorila.runtime.ray_runtime import RayRuntime

    runtime = RayRuntime()
    try:
        runtime.plan(len(sizes) + 1)
        spec = ServerSpec(rule=UpdateRule.asynchronous(), num_shards=1, optimizer="sgd", lr=1e-3)
        points = []
        for size in sizes:
            shards = runtime.start_shards(spec, np.zeros(size, np.float32))
            round_trip, _ = round_trips(shards.server.client(), np.full(size, 1e-3, np.float32), rounds)
            points.append((size * 4, round_trip))
        return points
    finally:
        runtime.shutdown()


def calibrate(seconds: float = 3.0, rounds: int = 30, algos: tuple[str, ...] = ("lstsq", "a3c", "impala"),
              progress: Callable[[str], None] = print) -> Calibration:
    """Measure everything (see the module doc)."""
    cpus = os.cpu_count() or 1
    workloads = {}
    for algo in algos:
        progress(f"compute: {algo} gradients, 1 and {cpus} workers at once, {seconds:g} s each")
        workloads[algo] = workload(algo, cpus, seconds)
    progress("apply: in-process pushes per optimizer and size")
    apply_points = {opt: [[size, apply_seconds(opt, size)] for size in SIZES] for opt in OPTIMIZERS}
    progress(f"transport: push+pull round trips through the Ray runtime's fast path, {len(SIZES)} sizes")
    trips = transport_round_trips(SIZES, rounds)
    fixed, per_byte = transport_fit(trips, {int(size): s for size, s in apply_points["sgd"]})
    return Calibration(cpus=cpus, transport="shm", latency_s=fixed / 2, bandwidth_Bps=2 / per_byte,
                       apply_points=apply_points, workloads=workloads, machine=machine(),
                       round_trips=[[b, t] for b, t in trips])
