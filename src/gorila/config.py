"""The run-level configuration every algorithm shares: where it runs, the update rule, the budget.

Field names are the CLI flags with underscores (``count_within`` is ``--count-within``), so a
:class:`~gorila.errors.ConfigError` names the flag to fix. What only some algorithms use lives in
their own configs (``--workers`` in lstsq's and a3c's, ``--env`` in the RL one), so a flag an
algorithm does not use is refused by name.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from gorila import validate
from gorila.errors import ConfigError
from gorila.params import OPTIMIZERS, ServerSpec, UpdateRule
from gorila.params.learning_rate import LearningRate
from gorila.params.owned import Publication
from gorila.params.rule import MODES, SEMI_ASYNC_CLIENTS
from gorila.runtime import RUNTIMES

#: The largest ``--seed``: derived seeds (seed + 1000·worker + env, the evaluator's seed + 10 000 + n)
#: must stay within PyTorch's 64-bit seeds.
SEED_MAX = 2**63 - 1
#: --call-timeout-s unless given: this many of the plan's chunk seconds, and never less than the floor
#: (a first chunk includes a worker's start-up; a slow machine takes seconds to start a process).
CALL_TIMEOUT_CHUNKS = 120
CALL_TIMEOUT_FLOOR_S = 60.0
#: How far past --time-limit-s a run may go: one chunk (the plan's chunk seconds) and this grace, in
#: which the chunks under way and the last evaluation come in; what is not in by then is given up.
TIME_LIMIT_GRACE_S = 30.0
#: --server: ``process``, the shards in processes of their own that the workers push to; or
#: ``learner``: the learners own the parameters and the shards are the store their actors read
#: (:mod:`gorila.params.owned`; several learners hold replicas, :mod:`gorila.params.replicas`).
SERVERS = ("process", "learner")
#: --server learner on Ray: the default shortest time between two publications (each a copy of the
#: parameters into the store, through its node's shared memory or a Ray call; see gorila.params.owned).
PUBLISH_S = 0.1
#: The algorithms whose learners can own the parameters: learners fed by actors through trajectory
#: queues or replay shards, and Gorila DQN's one bundle (``--replay local --actors 1``).
LEARNER_OWNED = ("apex", "dqn", "impala", "ppo")


def default_server(algo: str, learners: int, runtime: str) -> str:
    """``--server`` when not given: ``learner`` wherever the run's learners can own the parameters
    (one learner of :data:`LEARNER_OWNED`; several of apex, impala and ppo on Ray, as replicas),
    else ``process``. An owning learner applies its gradients where it computes them and sends its
    parameters to the actors' store: no push and pull of the whole vector on every update."""
    if algo not in LEARNER_OWNED:
        return "process"
    if learners == 1:
        return "learner"
    return "learner" if algo != "dqn" and runtime == "ray" else "process"
# The semi-async preset, whose numbers the help shows (they live in params/rule.py only).
_SEMI_ASYNC = UpdateRule.semi_async()


@dataclass(frozen=True)
class RunConfig:
    """What to run, where, under which update rule, and for how long; validated on construction::

        run = RunConfig(algo="lstsq", mode="sync")
        rule = run.rule(num_workers=4)          # UpdateRule.synchronous(num_workers=4)
    """

    algo: str = field(default="dqn", metadata={"help": "algorithm"})
    mode: str = field(default="async", metadata={
        "help": "update rule: sync (barrier, mean of all workers), async (apply each push), "
                "semi-async (aggregate counted pushes, tolerate bounded staleness)", "choices": MODES})
    shards: int = field(default=1, metadata={"help": "parameter-server shards"})
    server: str = field(default="process", metadata={
        "help": "process: the shards live in processes of their own, which every worker pushes its gradients to "
                "and pulls from; learner (apex, impala, ppo, one-learner dqn): the learner owns the parameters and "
                "its optimizer, applies its gradients where it computes them, and publishes its parameters to the "
                "shards, which its actors read; with --learners N (--runtime ray) each learner holds a replica, "
                "their gradients are averaged by an all-reduce (torch.distributed, gloo) and every replica takes "
                "the same step, the first publishing. Unless given: learner wherever the run's learners can own "
                "the parameters, else process", "choices": SERVERS})
    publish_every: int = field(default=1, metadata={
        "help": "--server learner: updates between the learner's publications of its parameters (on Ray at most "
                "one each --publish-every-s; never while one is still on its way; each chunk ends with one)"})
    publish_every_s: float = field(default=PUBLISH_S, metadata={
        "help": "--server learner on Ray: the shortest time in seconds between two publications of the learner's "
                "parameters (the local runtime publishes by updates alone, so that its rows do not depend on time)",
        "metavar": "S"})
    runtime: str = field(default="ray", metadata={
        "help": "ray (embedded local Ray unless --address / RAY_ADDRESS) or local (one process)",
        "choices": RUNTIMES})
    address: str | None = field(default=None, metadata={
        "help": "Ray cluster to join, HOST:PORT, or local: an embedded Ray on this machine (default: RAY_ADDRESS if "
                "set, else local)",
        "metavar": "HOST:PORT"})
    seed: int = field(default=0, metadata={"help": "random seed"})
    run_dir: Path | None = field(default=None, metadata={
        "help": "output directory (default: runs/<algo>-<env>-<YYYYmmdd-HHMMSS> in the current directory)",
        "metavar": "DIR"})
    resume: Path | None = field(default=None, metadata={
        "help": "continue the run in this directory from its newest good checkpoint, with its settings unless "
                "given again (--total-steps stays the run's total; --time-limit-s is more training). Exact on "
                "--runtime local (replay algorithms with --checkpoint-replay): the run goes on as if never stopped, "
                "the same metrics.csv rows but the times; on Ray, the parameters, optimizer state, counters and "
                "evaluation cadence come back, the workers start afresh",
        "metavar": "RUN_DIR"})
    optimizer: str | None = field(default=None, metadata={
        "help": "server-side optimizer", "choices": OPTIMIZERS})
    aggregate: int | None = field(default=None, metadata={
        "help": f"semi-async: counted pushes per update (default: {_SEMI_ASYNC.aggregate})"})
    count_within: int | None = field(default=None, metadata={
        "help": f"semi-async: staleness up to which a push counts (default: {_SEMI_ASYNC.count_within})"})
    accept_within: int | None = field(default=None, metadata={
        "help": f"semi-async: staleness up to which a push joins the update (default: {_SEMI_ASYNC.accept_within})"})
    semi_async_client: str | None = field(default=None, metadata={
        "help": "semi-async: blocks (default: every push waits for its reply, which brings the server's "
                "parameters whenever the worker is behind, so its next gradient is computed on them: the "
                "semi-asynchronous write-up's client) or pipelines (the next gradient is computed while the "
                "reply travels; a worker waits only once a reply said it fell behind: pushed uncounted or "
                "rejected)", "choices": SEMI_ASYNC_CLIENTS})
    max_staleness: int | None = field(default=None, metadata={
        "help": "async: reject pushes staler than this (default: no bound)"})
    time_limit_s: float | None = field(default=None, metadata={
        "help": "stop after this many seconds of training, counted from the first training step: "
                "start-up (Ray, workers, evaluator) is not counted; with --resume, this many more seconds. "
                f"Training ends by the limit + one chunk + {TIME_LIMIT_GRACE_S:g} s: the chunks and the evaluation "
                "under way get that long, what is not in by then is given up (chunks that never come back fail "
                "the run, everything saved) (default: no limit)", "metavar": "SECONDS"})
    checkpoint_every_s: float = field(default=60.0, metadata={"help": "seconds between checkpoints"})
    call_timeout_s: float | None = field(default=None, metadata={
        "help": f"longest wait for any worker call (default: {CALL_TIMEOUT_CHUNKS} times the plan's chunk "
                f"seconds, at least {CALL_TIMEOUT_FLOOR_S:g} s)",
        "metavar": "SECONDS"})
    actor_timeout_s: float | None = field(default=None, metadata={
        "help": "restart a worker whose chunk of steps has not finished after this many seconds (a stalled "
                "environment): on Ray its process is restarted and the other groups go on meanwhile; on the local "
                "runtime a worker (the evaluator too) whose step has not returned is rebuilt; counted in "
                "worker_restarts (default: wait up to --call-timeout-s, then fail the run, everything saved)",
        "metavar": "SECONDS"})
    preset: str | None = field(default=None, metadata={
        "help": "fill the flags not given with a published setting (gorila presets lists them, with their "
                "sources); a flag given still wins; --algo defaults to the preset's", "metavar": "NAME"})
    # Where the preset comes from (paper, table), filled in with it: config.json and summary.json name it.
    preset_source: str | None = None
    # Where an RL run's --total-steps comes from (the flag, a preset, the env's published budget or
    # gorila's default), filled in with it: the run's first lines and config.json say it.
    budget_source: str | None = None
    # When the run was configured: the default run directory's name, the same however often asked.
    stamp: str = field(default_factory=lambda: time.strftime("%Y%m%d-%H%M%S"))

    def __post_init__(self) -> None:
        validate.choice("runtime", self.runtime, RUNTIMES)
        validate.integer("shards", self.shards, low=1, high=256)
        validate.integer("seed", self.seed, low=0, high=SEED_MAX)
        if self.run_dir is not None:
            validate.directory("run_dir", self.run_dir)
        if self.optimizer is not None:
            validate.choice("optimizer", self.optimizer, OPTIMIZERS)
        if self.address and self.runtime != "ray":
            raise ConfigError("address", "joins a Ray cluster: use it with --runtime ray")
        if self.time_limit_s is not None:
            validate.number("time_limit_s", self.time_limit_s, low=0.0, low_open=True)
        validate.number("checkpoint_every_s", self.checkpoint_every_s, low=0.0, low_open=True)
        if self.call_timeout_s is not None:
            validate.number("call_timeout_s", self.call_timeout_s, low=0.0, low_open=True)
        if self.actor_timeout_s is not None:
            validate.number("actor_timeout_s", self.actor_timeout_s, low=0.0, low_open=True)
        self.rule(num_workers=1)  # e.g. --count-within 5 --accept-within 3 is refused here, before anything starts
        if self.server == "workers":
            raise ConfigError("server", "workers (a synchronous server spread over the workers in shared memory) is "
                                        "no more: --server process --mode sync makes the same updates; apex, impala "
                                        "and ppo: --server learner --learners N averages the learners' gradients "
                                        "with an all-reduce")
        validate.choice("server", self.server, SERVERS)
        validate.integer("publish_every", self.publish_every, low=1, high=1_000_000)
        validate.number("publish_every_s", self.publish_every_s, low=0.0, high=3600.0)
        if self.server == "learner" and self.algo not in LEARNER_OWNED:
            raise ConfigError("server", f"learner (the learner owns the parameters) is for --algo "
                                        f"{' and '.join(LEARNER_OWNED)}, not {self.algo}: use process")

    def rule(self, num_workers: int) -> UpdateRule:
        """The update rule ``mode`` and its knobs select; ``num_workers`` is how many gradients a
        synchronous update waits for."""
        return UpdateRule.for_mode(self.mode, num_workers, aggregate=self.aggregate,
                                   count_within=self.count_within, accept_within=self.accept_within,
                                   max_staleness=self.max_staleness, client=self.semi_async_client)

    def call_timeout(self, chunk_seconds: float | None) -> float:
        """``--call-timeout-s``, else scaled to a plan whose chunks last ``chunk_seconds`` (None:
        chunks of steps, the floor)."""
        if self.call_timeout_s is not None:
            return self.call_timeout_s
        return max(CALL_TIMEOUT_FLOOR_S, CALL_TIMEOUT_CHUNKS * (chunk_seconds or 0.0))

    def time_limit_end(self, chunk_seconds: float | None) -> float | None:
        """The training seconds by which a run with ``--time-limit-s`` ends (see its help), or None."""
        if self.time_limit_s is None:
            return None
        return self.time_limit_s + (chunk_seconds or 0.0) + TIME_LIMIT_GRACE_S

    def server_spec(self, rule: UpdateRule, default_optimizer: str, lr: LearningRate, learners: int = 1) -> ServerSpec:
        """The parameter server this run asks for: ``--shards``, ``--server`` and ``--optimizer``
        (else the algorithm's ``default_optimizer``) around the algorithm's rule and rates;
        ``learners``: how many learners own the parameters under ``--server learner`` (several
        hold replicas: placement ``replicas``, on Ray only)."""
        replicas = self.server == "learner" and learners > 1
        if replicas and self.runtime != "ray":
            raise ConfigError("learners", f"{learners} learners that own the parameters hold replicas in processes "
                                          "of their own, which meet in an all-reduce: use --runtime ray, or "
                                          "--learners 1, or --server process")
        return ServerSpec(rule=rule, num_shards=self.shards, optimizer=self.optimizer or default_optimizer, lr=lr,
                          placement="replicas" if replicas else "process")

    def publication(self) -> Publication | None:
        """With ``--server learner``, when the learner publishes its parameters; else None."""
        if self.server != "learner":
            return None
        local = self.runtime == "local"
        return Publication(every_updates=self.publish_every, every_s=0.0 if local else self.publish_every_s,
                           at_step_end=local and self.publish_every == 1)

    def resolved_run_dir(self, label: str) -> Path:
        """``resume``, ``run_dir`` or ``runs/<algo>-<label>-<time>``; a new run in a directory
        holding another run is refused."""
        if self.resume is not None:
            return Path(self.resume)
        if self.run_dir is None:
            return Path("runs") / f"{self.algo}-{label.replace('/', '_')}-{self.stamp}"
        path = Path(self.run_dir)
        if (path / "metrics.csv").exists():
            raise ConfigError("run_dir", f"{path} already holds a run; continue it with --resume {path} "
                                         "or choose another --run-dir")
        return path


def values_from_json(values: dict) -> dict:
    """Config field values as read back from a run's ``config.json``: JSON has no tuples, so
    tuple fields (e.g. ``hidden``) come back as lists and are turned back into tuples here."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
