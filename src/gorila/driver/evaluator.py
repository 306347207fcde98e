"""The evaluator worker: it plays the newest parameters while training goes on (placed and judged
by :class:`~gorila.driver.policy_evaluation.PolicyEvaluation`).

No torch at import: an evaluator of a network with a numpy twin (an MLP or MinAtar's: a plain
Q-network, or an actor-critic's policy) plays it in numpy
(:class:`~gorila.nets.numpy_conv.NumpyNetwork`), and its process never loads torch."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from gorila.envs.evaluation import EvaluationEpisodes
from gorila.envs.faults import EnvFailures
from gorila.envs.normalize import NormalizedPolicy, RunningStats, Statistics
from gorila.errors import EnvFailedError
from gorila.nets.numpy_conv import NumpyNetwork
from gorila.params import ParameterServer

if TYPE_CHECKING:
    from torch import nn

#: In one process the evaluator plays between the training chunks, in slices that take at most
#: this share of the wall time, so that a long evaluation (Atari) never stalls training.
IN_PROCESS_SHARE = 1 / 3
MIN_SLICE_S = 0.02
#: In a process of its own, with ``--actor-timeout-s``, the evaluator plays in slices of at most this long (and
#: at most half that timeout), so that a slice that outlasts the timeout is a hang, not a long evaluation.
SLICE_S = 5.0


class Evaluator:
    """A worker: a ``step()`` pulls the newest parameters and plays ``episodes`` episodes::

        ev = Evaluator(0, server, env_id="CartPole-v1", network_fn=..., policy_fn=greedy_policy,
                       episodes=10, epsilon=0.05, seed=0)
        ev.step(); ev.report()   # {"eval_return": 500.0, "eval_version": 812, "playing": False, ...}

    ``network_fn()`` builds the architecture; ``policy_fn(net)`` turns it into a function from a
    batch of observations to greedy actions. With ``numpy_policy`` (an unset
    :class:`~gorila.nets.numpy_conv.NumpyNetwork` of the network's greedy policy, which the builder made
    where that policy is an MLP) neither is used: the greedy actions come from a copy of it, and the
    process never imports torch. Episodes start after up to ``noop_max`` no-ops.
    With ``share`` (the evaluator shares a process with training) a step plays only a slice, as
    long as ``share / (1 - share)`` times the time since the previous slice ended, and the next
    step goes on with the same parameters; ``report()["playing"]`` says an evaluation is under way.
    With ``slice_s`` (and no ``share``) every slice is that long.

    An env that fails is rebuilt and its episode dropped and played again; too many failures
    within a window (:class:`~gorila.envs.faults.EnvFailures`) fail that evaluation, not the
    worker: its report then holds ``eval_failed`` (why) instead of returns. ``env_failures``
    (each one an episode dropped) and ``evaluations_failed`` count over every evaluation so far.
    The report carries the parameters it played (``eval_params``) and the seed of its episodes
    (``eval_seed``), so that the best ones can be saved and played again exactly. Given the run's
    normalisation statistics (:meth:`normalize_with`), an evaluation normalises its observations by
    those it had when it began (frozen: nothing it sees is added), and its report carries them
    (``eval_statistics``, checkpoint arrays) to be saved with the parameters.
    """

    def __init__(self, worker_id: int, server: ParameterServer, *, env_id: str,
                 network_fn: Callable[[], nn.Module] | None, policy_fn: Callable[[nn.Module], Callable] | None,
                 episodes: int, epsilon: float, seed: int, noop_max: int = 30, share: float | None = None,
                 slice_s: float | None = None, clock: Callable[[], float] = time.perf_counter,
                 numpy_policy: NumpyNetwork | None = None):
        self.env_id, self.episodes, self.epsilon, self.noop_max = env_id, episodes, epsilon, noop_max
        self.seed = seed + 10_000
        self.share, self.slice_s, self.clock = share, slice_s, clock
        # Objects, not closures or bound methods: an evaluator is saved in the local runtime's snapshot.
        # A copy: on the local runtime a rebuilt evaluator gets the same factory's object.
        self.player: NumpyNetwork | TorchPlayer
        if numpy_policy is not None:
            self.player = copy.deepcopy(numpy_policy)
        elif network_fn is not None and policy_fn is not None:
            self.player = TorchPlayer(network_fn, policy_fn)
        else:
            raise ValueError("an evaluator plays a numpy_policy, or the network of network_fn through policy_fn")
        self.client = server.client(worker_id)
        self.evaluations = 0
        self.last: dict[str, Any] = {}
        self.playing: EvaluationEpisodes | None = None
        self.played_s = 0.0
        self.taken_at = 0.0  # when the evaluation under way pulled its parameters (wall clock)
        self.slice_ended: float | None = None
        self.failures = EnvFailures()  # the evaluation under way's
        self.env_failures = 0  # of the evaluations before the one under way
        self.evaluations_failed = 0
        self.statistics: RunningStats | None = None  # the observations' statistics, as last handed
        self.frozen: RunningStats | None = None  # those of the evaluation under way

    def normalize_with(self, statistics: Statistics) -> None:
        """The run's statistics, for the evaluations that begin from now on."""
        self.statistics = None if statistics.obs is None else statistics.obs.copy()

    def step(self) -> None:
        started = self.clock()
        try:
            played = self._play(started)
        except EnvFailedError as err:
            self._ended()
            self.evaluations_failed += 1
            self.last = {"eval_failed": f"the evaluation at version {self.version} failed: {err}",
                         "eval_version": self.version, "eval_seconds": self.played_s}
            return
        if played is None:
            return
        returns, seed = played.returns, self.seed + self.evaluations
        self._ended()
        self.last = {"eval_return": float(np.mean(returns)), "eval_min": float(np.min(returns)),
                     "eval_max": float(np.max(returns)), "eval_returns": returns, "eval_version": self.version,
                     "eval_seconds": self.played_s, "eval_seed": seed, "eval_capped": played.capped,
                     "eval_params": self.params,
                     "eval_taken_at": self.taken_at,
                     **({} if self.frozen is None else {"eval_statistics": Statistics(obs=self.frozen).arrays()})}

    def _play(self, started: float) -> EvaluationEpisodes | None:
        """One slice of the evaluation under way (begun first if none is); the evaluation once it
        has played out, None while it has not."""
        if self.playing is None:
            # a copy: the report hands these parameters back, to be saved if they score best
            self.params = np.array(self.client.pull(), dtype=np.float32, copy=True)
            self.taken_at = time.time()  # wall clock, which the driver's process shares (or nearly, on another node)
            self.player.set(self.params)
            self.frozen = self.statistics
            self.version, self.played_s = self.client.version, 0.0
            self.playing = EvaluationEpisodes(self.env_id, self.episodes, self.epsilon,
                                              seed=self.seed + self.evaluations, noop_max=self.noop_max,
                                              failures=self.failures,
                                              state_shape=getattr(self.player, "state_shape", ()))
        seconds = self.slice_s
        if self.share is not None:
            since = started - self.slice_ended if self.slice_ended is not None else 0.0
            seconds = max(MIN_SLICE_S, since * self.share / (1 - self.share))
        # Built for each slice: a snapshot of the evaluator holds no bound method.
        policy = self.player.greedy if self.frozen is None else NormalizedPolicy(self.player.greedy, self.frozen)
        done = self.playing.play(policy, seconds, self.clock)
        self.slice_ended = self.clock()
        self.played_s += self.slice_ended - started
        return self.playing if done else None

    def _ended(self) -> None:
        """The evaluation under way has ended (played out or failed): count it and its faults."""
        self.env_failures += self.failures.count
        self.failures = EnvFailures()
        if self.playing is not None:
            self.playing.close()
            self.playing = None
        self.slice_ended = self.clock()
        self.evaluations += 1

    def report(self) -> dict[str, Any]:
        return {**self.last, "playing": self.playing is not None,
                "env_failures": self.env_failures + self.failures.count,
                "evaluations_failed": self.evaluations_failed}


class TorchPlayer:
    """A torch network played by an :class:`Evaluator`: ``set(flat)`` loads the server's vector,
    ``greedy(obs)`` is ``policy_fn(net)`` without gradients (torch imported here, not at import).
    A recurrent policy's ``state_shape`` (one episode's core state) is its own; its ``greedy``
    takes and gives the episodes' states too (:class:`~gorila.envs.evaluation.EvaluationEpisodes`)."""

    def __init__(self, network_fn: Callable[[], nn.Module], policy_fn: Callable[[nn.Module], Callable]):
        from gorila.nets import FlatParams

        self.net = network_fn().eval()
        self.flat = FlatParams(self.net)
        self.policy = policy_fn(self.net)
        self.state_shape: tuple[int, ...] = tuple(getattr(self.policy, "state_shape", ()))

    def set(self, flat: np.ndarray) -> None:
        self.flat.set(flat)

    def greedy(self, obs: np.ndarray, *memory: np.ndarray) -> Any:
        import torch

        with torch.no_grad():
            return self.policy(obs, *memory)
