"""Evaluate a greedy policy with null-op starts, and put Atari scores on the human-normalized scale."""

from __future__ import annotations

import json
import os
import re
import time
import warnings
from collections import deque
from collections.abc import Callable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from gorila import validate
from gorila.envs.faults import EnvCheck, EnvFailures, reward_fault
from gorila.envs.make import ATARI_FRAME_SKIP, close_env, is_atari, make_env
from gorila.errors import ConfigError

#: The longest an evaluation episode plays before it is cut, its return so far counting: ALE's own
#: cap, 108,000 frames (30 minutes of play), in agent steps of 4 frames. An env without a time limit
#: (MinAtar's) under a greedy policy that found a safe corner (Seaquest's sub idling at the surface)
#: would otherwise play one episode for as long as the run lasts, and no evaluation would end.
EVAL_MAX_STEPS = 27_000


def evaluate(policy_fn: Callable[..., Any], env_id: str, episodes: int, epsilon: float,
             seed: int, noop_max: int = 30, video_dir: Path | None = None,
             state_shape: tuple[int, ...] = ()) -> list[float]:
    """Unclipped returns of ``episodes`` episodes played ε-greedily with ``policy_fn``::

        scores = evaluate(lambda obs: q(torch.as_tensor(obs)).argmax(1).numpy(),
                          "ALE/Pong-v5", episodes=30, epsilon=0.05, seed=123)

    ``policy_fn`` maps a batch of observations to greedy actions (a recurrent one, with its
    ``state_shape``, as :class:`EvaluationEpisodes` says). See :class:`EvaluationEpisodes` for the
    null-op starts and ``video_dir``.
    """
    played = EvaluationEpisodes(env_id, episodes, epsilon, seed, noop_max, video_dir, state_shape=state_shape)
    try:
        played.play(policy_fn)
    finally:
        played.close()
    return played.returns


class EvaluationEpisodes:
    """``episodes`` evaluation episodes played side by side, which can be played in slices::

        played = EvaluationEpisodes("ALE/Pong-v5", episodes=10, epsilon=0.05, seed=123)
        while not played.play(policy_fn, seconds=0.2):    # at most 0.2 s at a time
            ...                                           # e.g. train in between
        played.returns                                    # unclipped, one per episode
        played.close()

    Each episode starts with a random number (0..``noop_max``) of no-op actions (action 0) — the
    "null-op starts" of the DQN and Gorila papers — which makes the start state vary even for
    deterministic games. Their rewards count toward the return. Envs whose action 0 is not a
    no-op (CartPole's is "push left") get none: see :func:`has_noop`. The environments are built
    with ``training=False``: real rewards, no end on a life loss; the Atari preprocessing's own
    no-ops are turned off so they are not doubled. With ``video_dir`` each episode is recorded
    there by Gymnasium's ``RecordVideo`` (``eval-<i>-episode-0.mp4``; the env must render
    ``rgb_array`` frames, and MoviePy be installed: ``pip install 'gorila[video]'``).

    Environments fail as training's do, judged by the same checks (:mod:`gorila.envs.faults`): one
    that fails is rebuilt and its episode dropped and played again, ``failures`` counts them, and
    too many within its window fail the evaluation with :class:`~gorila.errors.EnvFailedError` (see
    :meth:`play`). Actions are sent as training sends them (a ``Discrete(n, start=s)`` env gets
    ``s..s+n-1``; its no-op is ``s``).

    Every step of every episode counts toward a slice's time, no-ops included, and a slice may end
    between two episodes' steps of a round (the rest of the round is stepped first in the next
    one, with the actions already chosen): an env of seconds per step plays in slices as short as
    one step, and the episodes are the same however they were sliced.

    An episode ends where the env ends it or after ``max_steps`` steps (default
    :data:`EVAL_MAX_STEPS`), no-ops included, whichever comes first; ``capped`` counts the episodes
    cut there.

    With ``state_shape`` the policy is recurrent, ``policy_fn(obs, state, starts) -> (actions,
    state)`` (:class:`~gorila.nets.recurrent.RecurrentGreedyPolicy`): each episode's core state is
    kept here (so a slice's policy, built anew, goes on from it), the policy sees every live
    episode's observation at every step, no-ops and ε's random actions included, as its memory
    must, and ``starts`` marks each episode's first (and a dropped episode's new first) observation.
    """

    def __init__(self, env_id: str, episodes: int, epsilon: float, seed: int, noop_max: int = 30,
                 video_dir: Path | None = None, failures: EnvFailures | None = None,
                 max_steps: int = EVAL_MAX_STEPS, state_shape: tuple[int, ...] = ()):
        validate.integer("eval_episodes", episodes, low=1)
        validate.number("eval_epsilon", epsilon, low=0.0, high=1.0)
        validate.integer("noop_max", noop_max, low=0)
        validate.integer("max_steps", max_steps, low=1)
        self.env_id, self.epsilon, self.seed, self.video_dir = env_id, epsilon, seed, video_dir
        self.max_steps, self.capped = max_steps, 0
        self.state_shape = tuple(state_shape)
        self.core_state = np.zeros((episodes, *self.state_shape), np.float32)
        self.starts = np.ones(episodes, bool)
        self.failures = failures or EnvFailures()
        self._steps = 0   # env steps played, the clock of the failures' window
        # All episodes run side by side, so the policy sees one batch per step instead of one
        # observation per step per episode.
        self.envs: list[gym.Env] = []
        if video_dir is not None:
            _check_renders(env_id)
        try:
            self.envs = [self._build(i) for i in range(episodes)]
            self._start(noop_max)
        except BaseException:
            self.close()
            raise

    def _build(self, i: int) -> gym.Env:
        if self.video_dir is not None:  # frames are drawn off-screen: pygame (classic control) needs no display
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        env = make_env(self.env_id, seed=self.seed + i, training=False, noop_max=0,
                       render_mode=None if self.video_dir is None else "rgb_array")
        return env if self.video_dir is None else _recorded(env, self.env_id, Path(self.video_dir), i)

    def _start(self, noop_max: int) -> None:
        actions = self.envs[0].action_space
        # Box actions: the policy's action (its mean, clipped by the check) at every step, no ε, no no-ops
        self.n_actions = int(actions.n) if isinstance(actions, gym.spaces.Discrete) else None
        if self.n_actions is None and self.epsilon > 0:
            raise ConfigError("eval_epsilon", f"{self.env_id} has Box actions, evaluated with the policy's own "
                                              f"action: eval_epsilon must be 0, got {self.epsilon}")
        self.space = self.envs[0].observation_space
        self.check = EnvCheck(self.env_id, self.space, self.envs[0].action_space)
        if not has_noop(self.envs[0]):
            noop_max = 0  # action 0 is a real move (CartPole: push left), not "do nothing"
        self.noop_max = noop_max
        self.rng = np.random.default_rng(self.seed)
        self.totals = np.zeros(len(self.envs))
        self.lengths = np.zeros(len(self.envs), np.int64)  # each episode's steps so far
        self.live = np.ones(len(self.envs), bool)
        self.noops = np.zeros(len(self.envs), np.int64)  # no-ops each episode has still to play
        self.obs: list = [None] * len(self.envs)
        self._round: deque[tuple[int, int]] = deque()  # (episode, action) of the round under way, still to step
        for i in range(len(self.envs)):
            self._begin(i)

    def _begin(self, i: int) -> None:
        """Start episode ``i``: reset its env (rebuilt and reset again while it fails) and draw its
        no-ops, which its next rounds play."""
        while True:
            # A dropped episode is played again from another start, not from the one that failed.
            seed = self.seed + i + len(self.envs) * self.failures.count
            try:
                o, _ = self.envs[i].reset(seed=seed)
                fault = self.check.observation(i, o)
            except Exception as err:  # any failure of the env's own code: rebuild it
                fault = f"{self.env_id} env {i}: {type(err).__name__} in reset: {err}"
            if fault is None:
                self.obs[i], self.totals[i], self.lengths[i], self.live[i] = o, 0.0, 0, True
                self.starts[i] = True
                self.noops[i] = int(self.rng.integers(0, self.noop_max + 1))
                return
            self._rebuild(i, fault)

    def _rebuild(self, i: int, fault: str) -> None:
        """Count env ``i``'s failure (raising :class:`~gorila.errors.EnvFailedError` at the
        failures' limit), drop its episode and build the env again."""
        self.failures.record(fault, self._steps)
        close_env(self.envs[i], f"{self.env_id} env {i}")  # a broken env may fail to close too; it is dropped
        self.envs[i] = self._build(i)

    @property
    def done(self) -> bool:
        return not self.live.any()

    @property
    def returns(self) -> list[float]:
        """Each episode's unclipped return so far (final once :attr:`done`)."""
        return [float(r) for r in self.totals]

    def play(self, policy_fn: Callable[..., Any], seconds: float | None = None,
             clock: Callable[[], float] = time.perf_counter) -> bool:
        """Step the live episodes until all have ended, or until ``seconds`` have passed (at least
        one step); returns whether all have ended. An env that raises, or returns an observation
        outside its space or a reward that is not a finite number, is rebuilt and its episode played
        again from a new start (each failure, and so each dropped episode, counted in ``failures``);
        ``failures.limit`` of them within its window raise :class:`~gorila.errors.EnvFailedError`:
        the evaluation has failed."""
        deadline = None if seconds is None else clock() + seconds
        while not self.done:
            if not self._round:
                self._round = self._next_round(policy_fn)
            while self._round:
                i, action = self._round.popleft()
                self._step(i, action)
                if deadline is not None and self._round and clock() >= deadline:
                    return False  # within a round: the next slice steps the rest of it first
            if deadline is not None and clock() >= deadline:
                break
        return self.done

    def _next_round(self, policy_fn: Callable[..., Any]) -> deque[tuple[int, int]]:
        """One action for every live episode: a no-op while it has some to play, else ε-greedy."""
        idx = np.flatnonzero(self.live)
        remembered = None
        if self.state_shape:  # a recurrent policy sees every live episode's observation
            chosen, self.core_state[idx] = policy_fn(np.stack([self.obs[i] for i in idx]), self.core_state[idx],
                                                     self.starts[idx])
            self.starts[idx] = False
            remembered = np.asarray(chosen)
        if self.n_actions is None:
            if remembered is None:
                remembered = np.asarray(policy_fn(np.stack([self.obs[i] for i in idx])))
            return deque(zip(idx.tolist(), list(remembered)))
        explore = self.rng.random(len(idx)) < self.epsilon
        actions = self.rng.integers(self.n_actions, size=len(idx))
        noop = self.noops[idx] > 0
        actions[noop] = 0
        self.noops[idx[noop]] -= 1
        greedy = ~explore & ~noop
        if remembered is not None:
            actions[greedy] = remembered[greedy]
        elif greedy.any():
            actions[greedy] = np.asarray(policy_fn(np.stack([self.obs[i] for i in idx[greedy]])))
        return deque(zip(idx.tolist(), actions.tolist()))

    def _step(self, i: int, action: int) -> None:
        self._steps += 1
        try:
            obs, reward, terminated, truncated, _ = self.envs[i].step(self.check.env_action(action))
        except Exception as err:  # any failure of the env's own code: rebuild it
            fault: str | None = f"{self.env_id} env {i}: {type(err).__name__} in step: {err}"
        else:
            fault = self.check.observation(i, obs) or reward_fault(self.env_id, i, reward)
        if fault is not None:
            self._rebuild(i, fault)
            self._begin(i)
            return
        self.obs[i] = obs
        self.totals[i] += float(reward)
        self.lengths[i] += 1
        ended = terminated or truncated
        capped = not ended and int(self.lengths[i]) >= self.max_steps
        self.capped += int(capped)
        self.live[i] = not (ended or capped)

    def close(self) -> None:
        """Close the environments (and write their videos); an error a close raises is logged and ignored."""
        for i, env in enumerate(self.envs):
            close_env(env, f"{self.env_id} env {i}")
        self.envs = []


def _check_renders(env_id: str) -> None:
    """Refuse an env that cannot draw ``rgb_array`` frames (asked for one, it would fail or warn)."""
    env = make_env(env_id, seed=0, training=False)
    modes = env.metadata.get("render_modes", [])
    close_env(env, env_id)
    if "rgb_array" not in modes:
        raise ConfigError("video", f"{env_id} does not render rgb_array frames (its render modes: "
                                   f"{', '.join(modes) or 'none'})")


def _recorded(env: gym.Env, env_id: str, video_dir: Path, index: int) -> gym.Env:
    from gymnasium.wrappers import RecordVideo
    # An Atari agent step is ATARI_FRAME_SKIP emulator frames of a 60 Hz console: real speed.
    fps = 60 // ATARI_FRAME_SKIP if is_atari(env_id) else None
    try:
        with warnings.catch_warnings():  # every episode's recorder but the first finds the folder there
            warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
            return RecordVideo(env, str(video_dir), episode_trigger=lambda episode: True,
                               name_prefix=f"eval-{index}", fps=fps, disable_logger=True)
    except gym.error.DependencyNotInstalled as err:
        env.close()
        raise ConfigError("video", f"recording needs MoviePy: pip install 'gorila[video]' ({err})") from err


def has_noop(env: gym.Env) -> bool:
    """Whether action 0 means "do nothing" (Atari's NOOP); only then are no-op starts meaningful."""
    meanings = getattr(env.unwrapped, "get_action_meanings", None)
    return meanings is not None and meanings()[0] == "NOOP"


def human_normalized(game_id: str, score: float) -> float:
    """``100 · (score − random) / (human − random)``: 0 plays like a random agent, 100 like a human::

        human_normalized("ALE/Pong-v5", 9.3)       # 100.0
        human_normalized("Breakout", 1.7)          # 0.0

    Accepts ``ALE/Breakout-v5``, ``BreakoutNoFrameskip-v4``, ``Breakout`` or ``breakout``. The
    reference scores are the Nature DQN paper's, the table Gorila normalized against (49 games;
    :data:`NORMALIZATION_SOURCE`, in ``gorila/data/atari_scores.json``).
    """
    random, human, _ = _reference(game_id)
    return 100.0 * (score - random) / (human - random)


def dqn_normalized(game_id: str, score: float) -> float:
    """``100 · (score − random) / (dqn − random)``: 0 plays like a random agent, 100 like Nature DQN
    (Nair et al. 2015 measured Gorila against DQN game by game)::

        dqn_normalized("ALE/Breakout-v5", 401.2)   # 100.0

    Same names and table as :func:`human_normalized`. Where DQN scored no better than random
    (Montezuma's Revenge) there is no scale: ``nan``."""
    random, _, dqn = _reference(game_id)
    return 100.0 * (score - random) / (dqn - random) if dqn > random else float("nan")


def _reference(game_id: str) -> tuple[float, float, float]:
    table = _scores()
    key = _game_key(game_id)
    if key not in table:
        raise ConfigError("env", f"no published random/human scores for {game_id!r}; "
                                 f"known games: {', '.join(sorted(table))}")
    return table[key]


def _game_key(game_id: str) -> str:
    name = game_id.split("/")[-1]
    name = re.sub(r"(NoFrameskip|Deterministic)?-v\d+$", "", name)
    return name.replace("_", "").replace("-", "").lower()


@cache
def _table() -> dict:
    return json.loads(resources.files("gorila").joinpath("data/atari_scores.json").read_text())


@cache
def _scores() -> dict[str, tuple[float, float, float]]:
    return {_game_key(name): (g["random"], g["human"], g["dqn"]) for name, g in _table()["games"].items()}


#: Where the random and human scores come from (written into summaries beside normalized scores).
NORMALIZATION_SOURCE = _table()["source"]
