"""Stand-ins for the roles that unit tests' fakes play in part. A fake subclasses one and overrides
what the code under test calls; every other method fails the test if it is called, so the fake is
of the role's type without pretending to more of it."""

from typing import Any

import numpy as np

from gorila.core import Runtime, ShardGroup, WorkerGroup
from gorila.driver.plan import Score
from gorila.params.shard import PushResult, PushTag
from gorila.reply import Pending, ServiceEndpoint


def _unused(what: str) -> AssertionError:
    return AssertionError(f"{what} is not part of this test")


class GroupStandIn:
    """A :class:`~gorila.core.WorkerGroup`."""

    def run_steps(self, steps: int, seconds: float | None = None) -> list[dict[str, Any]]:
        raise _unused("run_steps")

    def start_steps(self, steps: int, seconds: float | None = None) -> list[Pending[dict[str, Any]]]:
        raise _unused("start_steps")

    def reports(self) -> list[dict[str, Any]]:
        raise _unused("reports")

    def call(self, method: str, *args: Any) -> list[Any]:
        raise _unused("call")

    def kill(self, index: int) -> None:
        raise _unused("kill")


class ServicesStandIn:
    """A :class:`~gorila.core.ServiceGroup`."""

    def endpoints(self) -> list[ServiceEndpoint]:
        raise _unused("endpoints")

    def call(self, method: str, *args: Any) -> list[Any]:
        raise _unused("call")

    def stats(self) -> list[Pending[dict[str, Any]]]:
        raise _unused("stats")

    def save(self) -> None:
        raise _unused("save")


class EndpointStandIn:
    """A :class:`~gorila.reply.ServiceEndpoint`: where a plan's groups are built but never called."""

    def call(self, method: str, *args: Any) -> Pending[Any]:
        raise _unused(f"a call of {method}")


class ShardStandIn:
    """A :class:`~gorila.params.client.ShardEndpoint`."""

    def push(self, grad: np.ndarray, version: int, worker_id: int, tag: PushTag) -> Pending[PushResult]:
        raise _unused("push")

    def pull(self) -> Pending[tuple[np.ndarray, int]]:
        raise _unused("pull")

    def version(self) -> Pending[int]:
        raise _unused("version")

    def wait_version(self, at_least: int, wait_s: float) -> Pending[int]:
        raise _unused("wait_version")

    def connect(self) -> None:
        raise _unused("connect")

    def subscribe(self, name: str, endpoint: ServiceEndpoint, held: int) -> Pending[int]:
        raise _unused("subscribe")


class ReplyStandIn:
    """A :class:`~gorila.reply.Pending` reply."""

    def ready(self) -> bool:
        raise _unused("ready")

    def result(self, timeout_s: float) -> Any:
        raise _unused("result")


class EvaluationStandIn:
    """A :class:`~gorila.driver.plan.Evaluation` that judges nothing: a plan's for a test that never
    evaluates."""

    columns: tuple[str, ...] = ()
    target: float | None = None
    restarts = 0

    def start(self, runtime: Runtime, shards: ShardGroup, groups: dict[str, WorkerGroup],
              stall_s: float | None = None) -> None:
        raise _unused("start")

    def before_chunk(self, now: dict[str, float]) -> None:
        raise _unused("before_chunk")

    def after_chunk(self) -> Score | None:
        raise _unused("after_chunk")

    def awaited(self) -> list[Pending[Any]]:
        raise _unused("awaited")

    def finish(self, within_s: float | None = None) -> Score | None:
        raise _unused("finish")

    def summary(self) -> dict[str, Any]:
        raise _unused("summary")

    def state_dict(self) -> dict[str, Any]:
        raise _unused("state_dict")

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise _unused("load_state_dict")
