"""Several learners on replicas (``--server learner --learners N``): two learner processes on gloo
over 127.0.0.1, pushing different gradients (and different numbers of them per step), hold
bit-identical parameters after every step, equal to one process stepping on the mean of each
round's gradients; a member that dies breaks the other's next round within the timeout."""

import functools
import multiprocessing
import os
from dataclasses import replace
from multiprocessing.managers import BaseManager

import numpy as np
import pytest

from gorila.params import LocalEndpoint, ParameterServer, ServerSpec, UpdateRule
from gorila.params.owned import Publication
from gorila.params.rendezvous import Rendezvous, RendezvousSpec
from gorila.params.replicas import replicated_learner
from gorila.reply import Done

pytestmark = [pytest.mark.timeout(120), pytest.mark.heavy]  # two processes importing torch: ~25 s each

SIZE, SHARDS = 10, 2
SPEC = ServerSpec(UpdateRule.asynchronous(), num_shards=SHARDS, optimizer="adam", lr=0.05)
START = np.linspace(-1, 1, SIZE, dtype=np.float32)
#: Pushes per step of each learner: learner 1 has no data in step 2, learner 0 pushes twice in step 3.
PUSHES = {0: [1, 1, 1, 2, 1], 1: [1, 1, 0, 1, 1]}


class RendezvousManager(BaseManager):
    pass


RendezvousManager.register("Rendezvous", Rendezvous)


class ManagerEndpoint:
    """The rendezvous as a runtime's service endpoint would reach it, here through a manager."""

    def __init__(self, proxy):
        self.proxy = proxy

    def call(self, method, *args):
        return Done(getattr(self.proxy, method)(*args))


def loopback() -> str:
    return "lo"


def gradient(params: np.ndarray, rank: int, step: int, push: int) -> np.ndarray:
    """A learner's gradient on its own data: different for every learner, step and push."""
    target = np.sin(np.arange(SIZE, dtype=np.float32) * (rank + 1) + step + 0.5 * push).astype(np.float32)
    return ((params - target) * np.float32(1 + rank)).astype(np.float32)


class FakeLearner:
    """Pushes ``PUSHES[rank][step]`` gradients in its step, each on the parameters it reads first."""

    def __init__(self, worker_id, server):
        self.rank, self.client, self.steps = worker_id, server.client(worker_id), 0

    def step(self):
        for push in range(PUSHES[self.rank][self.steps]):
            self.client.push(gradient(self.client.params().copy(), self.rank, self.steps, push))
        self.steps += 1
        return True

    def report(self):
        return {}


def store() -> ParameterServer:
    endpoints = tuple(LocalEndpoint(shard) for shard in SPEC.build(START))
    return ParameterServer(endpoints, SPEC.layout(SIZE), SPEC.rule, timeout_s=20.0)


def member(rank, proxy, out, die_after=None):
    lost = []
    server = RendezvousSpec(ManagerEndpoint(proxy), loopback)
    factory = functools.partial(replicated_learner, FakeLearner, SPEC, Publication(every_s=0.0), 2,
                                on_lost=lost.append)
    worker = factory(rank, replace(store(), rendezvous=server))
    for step in range(len(PUSHES[0])):
        if step == die_after:
            out.put((rank, "died", None))
            out.close()
            out.join_thread()  # os._exit would not wait for the queue's thread to send it
            os._exit(0)
        try:
            worker.step()
        except Exception as error:  # the parent judges what came
            out.put((rank, "lost" if lost else "error", repr(error)))
            return
        params = np.concatenate([e.shard.pull()[0] for e in worker.endpoints])
        out.put((rank, step, params.tobytes()))
    worker.report()
    out.put((rank, "store", np.concatenate([e.store.shard.pull()[0] for e in worker.endpoints]).tobytes()))


def run_members(die_after=None):
    manager = RendezvousManager(address=("127.0.0.1", 0))
    manager.start()
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    try:
        proxy = manager.Rendezvous()
        procs = [ctx.Process(target=member, args=(rank, proxy, out, die_after if rank == 1 else None))
                 for rank in (0, 1)]
        for p in procs:
            p.start()
        results, ended = [], set()
        while len(ended) < 2:  # each member ends with its store, its death or its lost group
            results.append(out.get(timeout=90))
            if not isinstance(results[-1][1], int):
                ended.add(results[-1][0])
        for p in procs:
            p.join(timeout=30)
        return results
    finally:
        manager.shutdown()


def reference() -> list[np.ndarray]:
    """One process stepping on the mean of each round: round i of a step joins the i-th push of
    every learner that pushes at least i + 1 times in it."""
    shard_spec = ServerSpec(UpdateRule.asynchronous(), num_shards=SHARDS, optimizer="adam", lr=0.05)
    shards = shard_spec.build(START)
    out = []
    for step in range(len(PUSHES[0])):
        for i in range(max(PUSHES[0][step], PUSHES[1][step])):
            params = np.concatenate([s.pull()[0] for s in shards])
            grads = [gradient(params, rank, step, i) for rank in (0, 1) if i < PUSHES[rank][step]]
            mean = (grads[0] + grads[1] if len(grads) == 2 else grads[0]) / np.float32(len(grads))
            for s, part in zip(shards, SPEC.layout(SIZE).split(mean)):
                s.push(part, s.version, worker_id=0)
        out.append(np.concatenate([s.pull()[0] for s in shards]))
    return out


def test_two_learners_hold_bit_identical_replicas_stepping_on_the_mean_gradient():
    results = run_members()
    by = {(rank, step): value for rank, step, value in results}
    expected = reference()
    for step in range(len(PUSHES[0])):
        mine, theirs = by[(0, step)], by[(1, step)]
        assert mine == theirs, f"replicas differ after step {step}"
        assert np.array_equal(np.frombuffer(mine, np.float32), expected[step]), f"not the mean at step {step}"
    # The first learner alone published; its last publication is the replicas' parameters.
    assert by[(0, "store")] == by[(0, len(PUSHES[0]) - 1)]
    assert np.array_equal(np.frombuffer(by[(1, "store")], np.float32), START)


def test_a_learner_that_dies_breaks_the_others_round_within_the_timeout():
    results = run_members(die_after=1)
    got = {rank: (what, detail) for rank, what, detail in results if not isinstance(what, int)}
    assert got[1][0] == "died"
    assert got[0][0] == "lost", got[0]
