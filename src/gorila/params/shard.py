"""One contiguous slice of the flat parameter vector, with its version and optimizer."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Literal

import numpy as np

from gorila.errors import CheckpointError, GradientError, NonFiniteError, VersionError
from gorila.params.learning_rate import LearningRate
from gorila.params.optim import ServerOptimizer, all_finite, make_optimizer
from gorila.params.rule import Outcome, UpdateRule
from gorila.params.shard_stats import STAT_FIELDS, ShardStats


@dataclass(frozen=True)
class PushResult:
    """What a push did.

    ``applied``: the push ended a round and the version moved on (the round's step may still have
    been rolled back: see :func:`apply_round`). ``params`` holds the shard's current parameters
    whenever the pusher is behind after the push (its version < ``version``) or was refused for its
    tag, so a worker's round trip is one call. ``reason`` says why a push was rejected:
    ``"stale"``, ``"nonfinite"``, ``"restarted"`` (computed on parameters of the shard's life before
    a restart) or ``"duplicate"`` (a push already received). ``epoch`` is the shard's: the pusher
    labels its next push with it.
    """

    outcome: Outcome
    applied: bool
    version: int
    staleness: int
    reason: str | None = None
    params: np.ndarray | None = None
    epoch: int = 0


#: Why a push can be rejected, in the order the fast path's wire format numbers them.
REASONS = (None, "stale", "nonfinite", "restarted", "duplicate")


@dataclass(frozen=True)
class PushTag:
    """What a push carries besides its gradient and version, so that a shard applies it at most once::

        PushTag(epoch=0, client=0x5eed, seq=41)

    ``epoch`` is the shard life the gradient's parameters came from: a shard restored after a crash
    starts a new epoch and refuses older ones (their version numbers may name parameters it never
    had). ``client`` and ``seq`` number one client's pushes 0, 1, 2, ...; a push whose ``seq`` is
    not above the last one seen from that client is a redelivery and is dropped (``seq`` -1: not
    numbered). A restarted worker is a new client.

    ``reply_params`` False: the pusher reads its parameters from its node's cache (Menger), so an
    push that was behind comes back without the shard's parameters. A push refused for its tag
    (a restarted shard's, a duplicate) still brings them: they carry the shard's new epoch.
    """

    epoch: int = 0
    client: int = 0
    seq: int = -1
    reply_params: bool = True


def check_push(grad: np.ndarray, version: int, size: int, shard_id: int) -> None:
    """What a push must be wherever its shard lives: a float32 gradient of the shard's ``size``
    (else :class:`GradientError` naming expected and received) and an integer version ``>= 0``
    (else :class:`VersionError`)."""
    if not isinstance(grad, np.ndarray):
        raise GradientError(f"shard {shard_id}: expected a numpy float32 array of shape ({size},), "
                            f"got {type(grad).__name__}")
    if grad.dtype != np.float32 or grad.shape != (size,):
        raise GradientError(f"shard {shard_id}: expected float32 of shape ({size},), "
                            f"got {grad.dtype} of shape {grad.shape}")
    if isinstance(version, bool) or not isinstance(version, (int, np.integer)) or version < 0:
        raise VersionError(f"version must be an integer >= 0, got {version!r}")


@dataclass(frozen=True)
class Verdict:
    """How a shard judges one push (:func:`judge_push`): the rule's ``outcome``, the push's
    ``staleness``, why it was rejected (``"stale"``, ``"nonfinite"``; None when it joins the
    aggregate) and the pusher's non-finite pushes in a row with this one (``streak``)."""

    outcome: Outcome
    staleness: int
    reason: str | None
    streak: int


def judge_push(rule: UpdateRule, shard_version: int, grad: np.ndarray, version: int, streak: int, *,
               nonfinite_limit: int, shard_id: int, worker_id: int) -> Verdict:
    """The rules every placement of a shard (a :class:`ParameterShard`, the synchronous server
    spread over its workers) applies to a checked push computed on ``version`` that arrives at
    ``shard_version``, from a worker with ``streak`` non-finite pushes in a row before it::

        verdict = judge_push(rule, shard.version, grad, x, streak=0, nonfinite_limit=10, shard_id=0, worker_id=k)
        if verdict.reason is None: ...   # joins the aggregate, counted or accepted

    A version from the future is a :class:`VersionError`. Staleness beyond the rule's
    ``accept_within`` is ``"stale"``; a gradient that is not finite is ``"nonfinite"``, and the
    ``nonfinite_limit``-th in a row from one worker raises :class:`NonFiniteError` (that worker
    trains on garbage). A rejected push must change nothing but counters.
    """
    if version > shard_version:
        raise VersionError(f"shard {shard_id}: version {version} from worker {worker_id} is "
                           f"from the future (shard is at version {shard_version})")
    staleness = shard_version - int(version)
    outcome = rule.classify(staleness)
    if outcome == "rejected":
        return Verdict(outcome, staleness, "stale", streak)
    if not all_finite(grad):
        if streak + 1 >= nonfinite_limit:
            raise NonFiniteError(f"shard {shard_id}: worker {worker_id} pushed {streak + 1} non-finite "
                                 "gradients in a row (none applied); its loss has diverged or its input "
                                 "holds NaN or infinity")
        return Verdict("rejected", staleness, "nonfinite", streak + 1)
    return Verdict(outcome, staleness, None, 0)


def check_state(state: dict[str, np.ndarray], shard_id: int, check_values: bool = True) -> None:
    """Refuse (:class:`CheckpointError`) a shard state no shard reaches: a negative version or
    round count, negative counters, or (``check_values``) non-finite parameters, pending sum or optimizer
    state. A checkpoint's checksum says it is the file that was written, not that what was written
    is sane."""
    def refuse(why: str) -> CheckpointError:
        return CheckpointError(f"shard {shard_id}: the saved state has {why}")

    if "params" not in state or "counters" not in state:
        raise refuse("no parameters or no counters")
    counters = np.asarray(state["counters"])
    if counters.shape != (3,) or (counters < 0).any():
        raise refuse(f"an impossible version and round counts {counters.tolist()} (version, joined, counted)")
    for name in ("stats", "staleness", "optim.steps"):
        if name in state and (np.asarray(state[name]) < 0).any():
            raise refuse(f"negative counters in {name!r}")
    if not check_values:
        return
    for name, array in state.items():
        arrays_of_values = name in ("params", "pending") or (name.startswith("optim.") and name != "optim.steps")
        if arrays_of_values and not all_finite(np.asarray(array, np.float32).ravel()):
            raise refuse(f"NaN or infinity in {name!r}")


Round = Literal["open", "applied", "rolled_back"]


def apply_round(params: np.ndarray, optimizer: ServerOptimizer, rule: UpdateRule, total: np.ndarray,
                joined: int, counted: int) -> Round:
    """End a round of the aggregate if the rule says so, the step every placement of a shard
    takes: once ``counted`` pushes count toward ``rule.aggregate``, the mean of the ``joined``
    gradients summed in ``total`` goes through one optimizer step on ``params``::

        apply_round(params, optimizer, rule, total, joined, counted)   # "open", "applied" or "rolled_back"

    ``"open"``: the round goes on. ``"rolled_back"``: the step would have left parameters or
    optimizer state NaN or infinite (finite gradients can: one huge enough, or a sum of them that
    overflows), so it was undone; the round is over all the same, and the caller ends it as an
    applied one (the version moves on, so that a barrier's waiters go on), counting it apart.

    With more than one joined, ``total`` is divided in place (it is spent); a single gradient is
    read only, so it may be a view of the pusher's memory."""
    if counted < rule.aggregate:
        return "open"
    if joined > 1:
        with np.errstate(over="ignore", invalid="ignore"):  # an overflowed sum is caught after the step
            total /= np.float32(joined)
    with np.errstate(over="ignore", invalid="ignore"):
        return "applied" if optimizer.step_finite(params, total) else "rolled_back"


class ParameterShard:
    """A parameter shard: plain Python, placed in-process or as a Ray worker by a runtime.

    ::

        shard = ParameterShard(np.zeros(d, np.float32), rule=UpdateRule.semi_async(),
                               optimizer="sgd", lr=0.1)
        result = shard.push(grad, version=x, worker_id=k)   # -> PushResult
        params, version = shard.pull()                      # a copy

    A gradient that is not finite is rejected and leaves parameters, optimizer state and the
    pending aggregate bit-for-bit unchanged; the ``nonfinite_limit``-th in a row from one worker
    raises :class:`NonFiniteError` instead (that worker trains on garbage). A gradient of the
    wrong shape or dtype raises :class:`GradientError`; a version ahead of the shard raises
    :class:`VersionError`. A push's :class:`PushTag` makes it count at most once. A round whose
    step would leave parameters or optimizer state non-finite (a finite but huge gradient, or a sum
    that overflows) is rolled back: nothing changes but the version, and ``updates_rolled_back``
    counts it. A shard restored after a crash (:meth:`restore`) is in a new ``epoch``; a state no
    shard could reach (see :func:`check_state`) is refused.
    """

    def __init__(self, params: np.ndarray, rule: UpdateRule, optimizer: str | ServerOptimizer = "sgd",
                 lr: LearningRate = 0.1, shard_id: int = 0, nonfinite_limit: int = 10):
        params = np.asarray(params)
        if params.ndim != 1 or params.dtype != np.float32:
            raise GradientError(f"shard parameters must be a flat float32 vector, got "
                                f"shape {params.shape} dtype {params.dtype}")
        self.shard_id = shard_id
        self.rule = rule
        self.lr = lr
        self.nonfinite_limit = nonfinite_limit
        self.epoch = 0
        self._last_seq: dict[int, int] = {}  # by client: the last numbered push seen
        self._nonfinite_streak: dict[int, int] = {}  # by worker: non-finite pushes in a row
        self._params = params.copy()
        self._optimizer = (make_optimizer(optimizer, params.size, lr) if isinstance(optimizer, str)
                           else optimizer)
        self._pending = np.zeros_like(self._params)  # sum of gradients joined since the last update
        self._joined = 0  # R in the rule's terms counts only "counted" pushes; this counts all joined
        self._counted = 0
        self._version = 0
        self.stats = ShardStats()

    @property
    def version(self) -> int:
        return self._version

    @property
    def size(self) -> int:
        return self._params.size

    def push(self, grad: np.ndarray, version: int, worker_id: int = 0,
             out: np.ndarray | None = None, tag: PushTag | None = None) -> PushResult:
        """Offer a gradient computed on ``version``; see the module doc of ``rule`` for the outcome.

        Fresh parameters in the reply are written into ``out`` when given (e.g. a shared-memory
        slot the pusher reads), instead of a new array."""
        check_push(grad, version, self.size, self.shard_id)
        tag = tag or PushTag()
        if tag.epoch != self.epoch:
            self.stats.pushes_rejected_restarted += 1
            return self._refused("restarted", version, out)
        if tag.seq >= 0:
            if tag.seq <= self._last_seq.get(tag.client, -1):
                self.stats.pushes_rejected_duplicate += 1
                return self._refused("duplicate", version, out)
            self._last_seq[tag.client] = tag.seq
        verdict = judge_push(self.rule, self._version, grad, version, self._nonfinite_streak.get(worker_id, 0),
                             nonfinite_limit=self.nonfinite_limit, shard_id=self.shard_id, worker_id=worker_id)
        if verdict.streak:
            self._nonfinite_streak[worker_id] = verdict.streak
        else:
            self._nonfinite_streak.pop(worker_id, None)
        self.stats.bytes_in += grad.nbytes
        self.stats.staleness[verdict.staleness] += 1
        applied = False
        if verdict.reason == "stale":
            self.stats.pushes_rejected_stale += 1
        elif verdict.reason == "nonfinite":
            self.stats.pushes_rejected_nonfinite += 1
        else:
            applied = self._join(grad, counted=verdict.outcome == "counted")
            if verdict.outcome == "counted":
                self.stats.pushes_counted += 1
            else:
                self.stats.pushes_accepted += 1
        fresh = None
        if version < self._version and tag.reply_params:
            fresh = self._copy_params(out)
            self.stats.bytes_out += fresh.nbytes
        return PushResult(verdict.outcome, applied, self._version, verdict.staleness, verdict.reason, fresh,
                          self.epoch)

    def _refused(self, reason: str, version: int, out: np.ndarray | None) -> PushResult:
        """A push dropped for its tag: nothing changes; the pusher gets the current parameters."""
        fresh = self._copy_params(out)
        self.stats.bytes_out += fresh.nbytes
        return PushResult("rejected", False, self._version, max(self._version - int(version), 0), reason, fresh,
                          self.epoch)

    def pull(self, out: np.ndarray | None = None) -> tuple[np.ndarray, int]:
        """A copy of the current parameters (into ``out`` when given) and their version."""
        self.stats.pulls += 1
        self.stats.bytes_out += self._params.nbytes
        return self._copy_params(out), self._version

    def current(self) -> tuple[np.ndarray, int]:
        """A copy of the parameters and their version, not counted as a pull: what a shard sends
        the caches subscribed to it (:mod:`gorila.params.broadcast`), which count it themselves."""
        return self._params.copy(), self._version

    def _copy_params(self, out: np.ndarray | None) -> np.ndarray:
        if out is None:
            return self._params.copy()
        np.copyto(out, self._params)
        return out

    def _join(self, grad: np.ndarray, counted: bool) -> bool:
        if self._joined == 0:
            # Asynchronous rules: nothing pending, this gradient alone is the round (no copy of it).
            round_ = apply_round(self._params, self._optimizer, self.rule, grad, 1, int(counted))
            if round_ != "open":
                return self._advance(round_)
        with np.errstate(over="ignore", invalid="ignore"):  # an overflowed sum is caught after the step
            self._pending += grad
        self._joined += 1
        self._counted += int(counted)
        round_ = apply_round(self._params, self._optimizer, self.rule, self._pending, self._joined, self._counted)
        if round_ == "open":
            return False
        self._pending.fill(0.0)
        self._joined = self._counted = 0
        return self._advance(round_)

    def _advance(self, round_: Round) -> bool:
        """End a round, rolled back or not: the version moves on either way (a barrier's waiters
        go on; ``PushResult.applied`` says a round ended), and a rolled-back one is counted."""
        self._version += 1
        self.stats.updates += 1
        if round_ == "rolled_back":
            self.stats.updates_rolled_back += 1
        return True

    def state_dict(self, *, pending: bool = True, optimizer: bool = True,
                   params: bool = True) -> dict[str, np.ndarray]:
        """Parameters, pending aggregate, counters and optimizer state, as numpy arrays only (copies);
        a publication (:meth:`publication`) leaves out the pending aggregate, and may leave out the optimizer."""
        hist = sorted(self.stats.staleness.items())
        state = {"params": self._params.copy()} if params else {}
        state.update({
            "counters": np.array([self._version, self._joined, self._counted], np.int64),
            "stats": np.array([getattr(self.stats, f) for f in STAT_FIELDS], np.int64),
            "staleness": np.array(hist, np.int64).reshape(-1, 2),
        })
        if pending:
            state["pending"] = self._pending.copy()
        if optimizer:
            state.update({f"optim.{k}": v for k, v in self._optimizer.state_dict().items()})
        return state

    def publication(self, *, optimizer: bool) -> dict[str, np.ndarray]:
        """What a learner that owns this shard sends its store (:meth:`publish`): the state
        without the pending aggregate, the optimizer's only with ``optimizer``. Its parameters are
        this shard's own array, not a copy: a store endpoint takes what it keeps (a copy, a
        serialisation) before its ``publish`` returns, and the learner's next step comes after."""
        return {"params": self._params, **self.state_dict(pending=False, optimizer=optimizer, params=False)}

    def load_state_dict(self, state: dict[str, np.ndarray], *, check_values: bool = True) -> None:
        """Take ``state`` (a :meth:`state_dict`; one without the pending aggregate or the optimizer
        state keeps this shard's), refusing one of another size or one no shard reaches
        (:func:`check_state`; its arrays read for NaN only with ``check_values``) before
        anything changes."""
        if state["params"].shape != self._params.shape:
            raise GradientError(f"shard {self.shard_id}: checkpoint has {state['params'].shape} "
                                f"parameters, shard has {self._params.shape}")
        check_state(state, self.shard_id, check_values)
        np.copyto(self._params, state["params"])
        if "pending" in state:
            np.copyto(self._pending, state["pending"])
        self._version, self._joined, self._counted = (int(x) for x in state["counters"])
        self.stats = ShardStats(**dict(zip(STAT_FIELDS, (int(x) for x in state["stats"]))),
                                staleness=Counter({int(k): int(v) for k, v in state["staleness"]}))
        optim = {k[len("optim."):]: v for k, v in state.items() if k.startswith("optim.")}
        if optim:
            self._optimizer.load_state_dict(optim)

    def publish(self, state: dict[str, np.ndarray]) -> None:
        """Take what the learner that owns the parameters sends (``--server learner``, see
        :mod:`gorila.params.owned`): its parameters, version, update and push counts and, where
        given, optimizer state. This shard is then a store the actors read: it counts their pulls,
        and the parameters published as the bytes it took in. The arrays are not read for NaN
        again: the learner's own shard rolls back any step that would leave them non-finite, and
        what it started from was checked, so here the check would cost a pass over the parameters
        at every publication and find nothing."""
        pulls, bytes_out, bytes_in = self.stats.pulls, self.stats.bytes_out, self.stats.bytes_in
        self.load_state_dict(state, check_values=False)
        self.stats.pulls, self.stats.bytes_out = pulls, bytes_out
        self.stats.bytes_in = bytes_in + state["params"].nbytes

    def restore(self, state: dict[str, np.ndarray], epoch: int) -> None:
        """Come back from ``state`` (a checkpoint) after a crash, in a new ``epoch``.

        The pending aggregate is dropped: the pushes in it came from workers that are told to
        compute again on the restored parameters (their next push is ``"restarted"``)."""
        self.load_state_dict(state)
        self._pending.fill(0.0)
        self._joined = self._counted = 0
        self._last_seq.clear()
        self.epoch = epoch
