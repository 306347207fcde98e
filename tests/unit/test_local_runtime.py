"""The local runtime ends what it started: shutdown closes the workers that can be closed."""

import numpy as np
import pytest

from gorila.params import ServerSpec, UpdateRule
from gorila.runtime import LocalRuntime


class _Closable:
    def __init__(self, worker_id, server):
        self.closed = False

    def step(self) -> None:
        """Nothing to do."""

    def report(self) -> dict:
        return {}

    def close(self) -> None:
        self.closed = True


def test_shutdown_closes_the_workers_that_have_close():
    runtime = LocalRuntime()
    shards = runtime.start_shards(ServerSpec(rule=UpdateRule.asynchronous()), np.zeros(3, np.float32))
    closable = runtime.start_workers(_Closable, 2, shards.server, name="bundle")
    runtime.start_workers(lambda k, server: object(), 1, shards.server, name="bare")  # nothing to close
    runtime.shutdown()
    assert [w.closed for w in closable.workers] == [True, True]


class AlwaysBlocked:
    """A worker whose every step waits on another group (a rate limiter holding it back)."""

    def __init__(self):
        self.steps = 0

    def step(self):
        self.steps += 1
        return False

    def report(self):
        return {"steps": self.steps}


@pytest.mark.timeout(10)
def test_a_chunk_ends_as_soon_as_every_worker_is_blocked():
    from gorila.runtime.local import LocalWorkers

    workers = [AlwaysBlocked(), AlwaysBlocked()]
    assert LocalWorkers(workers).run_steps(10**9) == [{"steps": 1}, {"steps": 1}]
