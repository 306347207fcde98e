"""Small plans for the hang and failure tests, on either runtime: a learner that pushes, an actor
whose env hangs (``gorila/Hang-v0``), workers that fail, and the evaluation of a hanging env."""

import functools
import json
from pathlib import Path

import numpy as np

from gorila.checkpoint import load_checkpoint
from gorila.driver.plan import Budget, Plan, WorkerSpec
from gorila.driver.policy_evaluation import PolicyEvaluation
from gorila.envs.fake import HangingEnv
from gorila.nets import FlatParams
from gorila.nets.q import build_q_network, greedy_policy
from gorila.params import ServerSpec, UpdateRule

HANG = "gorila/Hang-v0"  # 5-step episodes of reward 1; the 20th step of each process never returns


class Pushes:
    """A learner: pulls and pushes a gradient of ones at every step."""

    def __init__(self, worker_id, server):
        self.client = server.client(worker_id)
        self.steps = 0

    def step(self):
        self.client.params()
        self.client.push(np.ones(self.client.layout.size, np.float32))
        self.steps += 1

    def report(self):
        return {"pushes": self.steps}


class HangingActor:
    """An actor that steps a :class:`HangingEnv`: its process's 20th env step never returns."""

    def __init__(self, worker_id, server):
        self.env = HangingEnv()  # built directly: in a Ray process this module's imports are not run
        self.env.reset(seed=worker_id)
        self.steps = 0

    def step(self):
        _, _, terminated, truncated, _ = self.env.step(0)
        if terminated or truncated:
            self.env.reset()
        self.steps += 1

    def report(self):
        return {"env_steps": self.steps}


class Fails:
    """A worker whose ``fail_at``-th step raises ``error``."""

    def __init__(self, worker_id, server, *, error, fail_at=5):
        self.client, self.error, self.fail_at, self.steps = server.client(worker_id), error, fail_at, 0

    def step(self):
        self.steps += 1
        if self.steps == self.fail_at:
            raise self.error

    def report(self):
        return {"steps": self.steps}


class NaNPushes(Pushes):
    """A learner whose every gradient is NaN: the shard refuses them, then ends the run."""

    def step(self):
        self.client.params()
        self.client.push(np.full(self.client.layout.size, np.nan, np.float32))


class NoEvaluation:
    columns, target, restarts = ("score",), None, 0

    def start(self, runtime, shards, groups, stall_s=None): ...
    def before_chunk(self, now): ...
    def after_chunk(self): ...
    def awaited(self): return []
    def finish(self, within_s=None): ...
    def summary(self): return {}
    def state_dict(self): return {}
    def load_state_dict(self, state): ...


def hang_evaluation(every_s=0.0):
    """Greedy play of ``gorila/Hang-v0``, 2 episodes an evaluation: the evaluator's process hangs in
    its 20th step, in its second evaluation."""
    network_fn = functools.partial(build_q_network, HANG, (8,), 0)
    return PolicyEvaluation(HANG, network_fn, greedy_policy, episodes=2, epsilon=0.0, seed=0, noop_max=0,
                            every_s=every_s, target=None), network_fn


def plan(groups, evaluation=None, size=None, budget=10**9, unit="updates", chunk_seconds=0.2):
    """A plan of the ``(name, factory, count)`` groups, judged by ``evaluation`` (none by default)."""
    network_fn = None
    if evaluation is not None:
        evaluation, network_fn = evaluation
    initial = FlatParams(network_fn()).get() if network_fn is not None else np.zeros(size or 4, np.float32)
    return Plan(algo="hang", label="hang", initial_params=lambda: initial.copy(),
                spec=ServerSpec(UpdateRule.asynchronous()),
                groups=lambda services: [WorkerSpec(name, factory, count) for name, factory, count in groups],
                evaluation=evaluation or NoEvaluation(), budget=Budget(budget, unit), processes=len(groups),
                chunk_steps=lambda updates: 10, chunk_seconds=chunk_seconds, network_fn=network_fn,
                snapshot=False)  # these workers are the tests' classes, which a snapshot may not name


def saved(run_dir: Path):
    """The run's summary and the meta of its newest checkpoint."""
    _, meta = load_checkpoint(run_dir / "checkpoints")
    return json.loads((run_dir / "summary.json").read_text()), meta


class DiesForGood(Pushes):
    """A learner whose process cannot be restarted: built again (``marker`` exists), it raises."""

    def __init__(self, worker_id, server, *, marker):
        if Path(marker).exists():
            raise RuntimeError("the learner cannot start again")
        Path(marker).touch()
        super().__init__(worker_id, server)
