"""Step several environments of one id at once and hand out clean transitions.

The Gymnasium backend resets an environment in the same step its episode ends; EnvPool resets in
the "next step" style: the step after an episode ends only resets that environment (its action is
ignored and it carries no reward). :class:`EnvRunner` hides that step, so every transition it
returns is a real ``(s, a, r, s')`` and ``s'`` at an episode end is the true final observation, not
the first observation of the next episode.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from gorila import validate
from gorila.envs.faults import EnvCheck, EnvFailures, reward_fault
from gorila.envs.make import (
    ATARI_FRAME_SKIP,
    ATARI_FRAME_STACK,
    ATARI_MAX_STEPS,
    ATARI_NOOP_MAX,
    RAW_REWARD,
    close_env,
    is_atari,
    make_env,
)
from gorila.errors import ConfigError
from gorila.types import Episode, Transitions

BACKENDS = ("auto", "gymnasium", "envpool")


class VectorBackend(Protocol):
    """``num_envs`` environments stepped together and auto-reset: within the step where an episode
    ends when ``same_step_reset``, else on the step after it (a step that only resets). ``broken``
    lists the environments rebuilt in the last step (their rows in it are not real steps);
    ``game_goes_on`` (None where it never happens) those whose episode the last step ended with a
    lost life while their game goes on (Atari's episodic life): their score runs on."""

    num_envs: int
    same_step_reset: bool
    broken: list[int]
    game_goes_on: np.ndarray | None
    failures: EnvFailures
    single_observation_space: gym.Space
    single_action_space: gym.Space

    def reset(self) -> np.ndarray: ...

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                 np.ndarray]:
        """``(obs, reward, raw_reward, terminated, truncated, current)``, each with a leading ``num_envs``
        axis; ``obs`` is where each step landed, ``current`` what to act on next (they differ only
        where a same-step reset began a new episode)."""

    def close(self) -> None: ...


class GymnasiumBackend:
    """Gymnasium environments stepped in turn, auto-resetting in Gymnasium's ``SAME_STEP`` mode::

        backend = GymnasiumBackend([lambda: CountingEnv(3), lambda: CountingEnv(4)])

    The same contract as Gymnasium's ``SyncVectorEnv(autoreset_mode=SAME_STEP)``, with the final
    observation in ``obs`` rather than in ``info``. Resetting in the same step, as a plain loop over
    the envs would, spares each episode a step that yields no transition. SyncVectorEnv's per-env
    bookkeeping (info merging, numpy item writes, a deep copy of every batch) costs about a fifth of
    a CartPole step; here each step collects the envs' own tuples and builds each batch array once
    (np.array of the list: a third of the time np.stack takes for small observations).

    An environment that raises in ``step`` or ``reset``, or returns an observation that does not
    fit the observation space or a reward that is not a finite number, is closed and built again from its function
    (see :mod:`gorila.envs.faults`, whose :class:`~gorila.envs.faults.EnvCheck` evaluation shares); its row in that
    step is a fresh reset, listed in ``broken``. Actions are indices ``0..n-1``, sent to a
    ``Discrete(n, start=s)`` env as ``s..s+n-1``.
    """

    same_step_reset = True
    game_goes_on: np.ndarray | None = None  # Gymnasium's AtariPreprocessing restarts the game at a lost life

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], env_id: str = "env",
                 failures: EnvFailures | None = None) -> None:
        self.env_fns, self.env_id = list(env_fns), env_id
        self.failures = failures or EnvFailures()
        self.envs = [fn() for fn in self.env_fns]
        self.num_envs = len(self.envs)
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.check = EnvCheck(env_id, self.single_observation_space, self.single_action_space)
        self.broken: list[int] = []
        self._steps = 0

    def reset(self) -> np.ndarray:
        self.broken = []
        return self._checked([self._reset(i) for i in range(self.num_envs)])

    def _reset(self, i: int) -> object:
        try:
            obs = self.envs[i].reset()[0]
        except Exception as err:  # any failure of the env's own code: rebuild it
            return self._rebuilt(i, f"{self.env_id} env {i}: {type(err).__name__} in reset: {err}")
        fault = self.check.observation(i, obs)
        return obs if fault is None else self._rebuilt(i, fault)

    def _step(self, i: int, action: object) -> tuple:
        try:
            result = self.envs[i].step(action)  # action: the env's own (Discrete.start added in step())
        except Exception as err:  # any failure of the env's own code: rebuild it
            fault = f"{self.env_id} env {i}: {type(err).__name__} in step: {err}"
        else:
            reward_wrong = reward_fault(self.env_id, i, result[1])
            if reward_wrong is None:
                return result
            fault = reward_wrong
        self.broken.append(i)
        return self._rebuilt(i, fault), 0.0, False, False, {}

    def _rebuilt(self, i: int, why: str) -> np.ndarray:
        """Count env ``i``'s failure (``why`` names the env), build it again and reset it; its
        first observation."""
        while True:
            self.failures.record(why, self._steps)  # raises at the limit
            close_env(self.envs[i], f"{self.env_id} env {i}")  # a broken env may fail to close too; it is dropped
            try:
                self.envs[i] = self.env_fns[i]()
                obs = self.envs[i].reset()[0]
            except Exception as err:
                why = f"{self.env_id} env {i}: {type(err).__name__} while rebuilding: {err}"
                continue
            fault = self.check.observation(i, obs)
            if fault is None:
                return obs
            why = fault

    def _checked(self, obs_list: Sequence) -> np.ndarray:
        """The batch of observations; one that does not fit the observation space is never
        handed out: its env is rebuilt and the reset observation takes its place."""
        obs = self.check.observations(obs_list)
        if obs is not None:
            return obs
        obs_list = list(obs_list)
        for i, o in enumerate(obs_list):
            fault = self.check.observation(i, o)
            if fault is not None:
                self.broken.append(i)
                obs_list[i] = self._rebuilt(i, fault)
        return np.array(obs_list, dtype=self.single_observation_space.dtype)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                 np.ndarray]:
        self._steps += 1
        self.broken = []
        actions = self.check.env_actions(np.asarray(actions))  # Discrete.start added, Box actions clipped
        # Any: the envs' own observations, rewards, flags and infos, each column made an array below
        columns: Iterator[Any] = zip(*[self._step(i, a) for i, a in enumerate(actions)])
        obs, reward, terminated, truncated, infos = columns
        obs = self._checked(obs)
        if self.broken:  # their rows are fresh resets, not steps: no reward, no episode end
            reward, terminated, truncated, infos = (list(x) for x in (reward, terminated, truncated, infos))
            for i in self.broken:
                reward[i], terminated[i], truncated[i], infos[i] = 0.0, False, False, {}
        # Which episodes ended, judged on the envs' own flags: a Python scan of a few of them costs
        # a tenth of the array operations that would say the same, on every step.
        ended = [i for i, (term, trunc) in enumerate(zip(terminated, truncated)) if term or trunc]
        reward = np.array(reward, np.float32)
        # Only wrapped envs (Atari's sign clipping) put anything in info: skip the per-env lookup otherwise.
        raw = (np.array([info.get(RAW_REWARD, r) for info, r in zip(infos, reward)], np.float32)
               if any(infos) else reward)
        terminated, truncated = np.array(terminated, bool), np.array(truncated, bool)
        current = obs
        if ended:
            current = obs.copy()
            for i in ended:
                current[i] = self._reset(i)  # a failure here costs no row: the episode had ended
        return obs, reward, raw, terminated, truncated, current

    def close(self) -> None:
        for i, env in enumerate(self.envs):
            close_env(env, f"{self.env_id} env {i}")


class EnvPoolBackend:
    """EnvPool's threaded environments for ``env_id``, with the same preprocessing as :func:`make_env`::

        if envpool_supports("ALE/Pong-v5"):
            backend = EnvPoolBackend("ALE/Pong-v5", 8, seed=0, training=True)   # obs (8, 4, 84, 84) uint8

    An Atari game is set up as :func:`make_env` sets up Gymnasium's: frame skip 4 with the last two
    frames max-pooled, 84×84 grayscale (the same area interpolation), a stack of 4 frames filled
    with the first one at a reset, 1..30 no-op frames at every reset, no sticky actions, no fire at
    the reset, episodes cut at 27,000 steps (108,000 frames). For the same actions, with the no-ops
    fixed at 1 (``noop_max=1``), both give the same frames, rewards and ends bit for bit
    (``tests/unit/test_envpool.py``). Rewards are clipped to their sign here rather than by EnvPool,
    so the raw reward stays available.

    One difference is kept on purpose: with ``terminal_on_life_loss`` a lost life ends the training
    episode (``terminated``, so the learner does not bootstrap across it) while the game goes on
    with the next life, after its 1..30 no-ops, as the DQN papers' episodic life does; Gymnasium's
    ``AtariPreprocessing`` restarts the whole game there. ``game_goes_on`` marks those steps, so that
    an episode's score (:class:`EnvRunner`) is the whole game's. EnvPool's games run in its own
    threads, ``threads`` of them (0: one per env, up to the machine's cores); one that fails fails
    the actor (nothing is rebuilt here).
    """

    same_step_reset = False

    def __init__(self, env_id: str, num_envs: int, *, seed: int, training: bool,
                 terminal_on_life_loss: bool = False, threads: int = 0, noop_max: int = ATARI_NOOP_MAX) -> None:
        import envpool

        # EnvPool 1.2.5 draws an Atari reset's no-ops from U(0, noop_max - 1) + 1, and crashes the
        # process (a segmentation fault) at noop_max 0: refused here.
        validate.integer("noop_max", noop_max, low=1)
        kwargs: dict = {"num_envs": num_envs, "seed": seed, "num_threads": threads}
        self._clip = training and is_atari(env_id)
        self._episodic_life = training and terminal_on_life_loss and is_atari(env_id)
        if is_atari(env_id):
            kwargs.update(episodic_life=self._episodic_life, reward_clip=False, stack_num=ATARI_FRAME_STACK,
                          gray_scale=True, img_height=84, img_width=84, frame_skip=ATARI_FRAME_SKIP,
                          noop_max=noop_max, repeat_action_probability=0.0, use_fire_reset=False,
                          max_episode_steps=ATARI_MAX_STEPS)
        self.envs = envpool.make_gymnasium(_envpool_task(env_id), **kwargs)
        self.num_envs = num_envs
        self.broken: list[int] = []
        self.failures = EnvFailures()
        self.game_goes_on: np.ndarray | None = None
        self.single_observation_space = self.envs.observation_space
        self.single_action_space = self.envs.action_space

    def reset(self) -> np.ndarray:
        obs, _ = self.envs.reset()
        return obs

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                 np.ndarray]:
        obs, reward, terminated, truncated, info = self.envs.step(np.asarray(actions))
        raw = np.asarray(reward, np.float32)
        reward = np.sign(raw) if self._clip else raw
        terminated = np.asarray(terminated, bool)
        if self._episodic_life:  # a life lost, the game not over: its episode ends, the game does not
            self.game_goes_on = terminated & ~np.asarray(info["terminated"], bool)
        return obs, reward, raw, terminated, np.asarray(truncated, bool), obs

    def close(self) -> None:
        self.envs.close()


def envpool_supports(env_id: str) -> bool:
    """True when ``envpool`` is importable and has a task for ``env_id``."""
    try:
        import envpool
    except ImportError:
        return False
    return _envpool_task(env_id) in envpool.list_all_envs()


def _envpool_task(env_id: str) -> str:
    return env_id.removeprefix("ALE/")


class EnvRunner:
    """Steps ``num_envs`` environments with a batch of actions; returns only real transitions::

        runner = make_env_runner("CartPole-v1", 4, seed=0, training=True)
        actions = policy(runner.observations)          # one action per environment
        t = runner.step(actions)                       # Transitions, len(t) <= 4
        replay.add_batch(t.obs, t.action, t.reward, t.next_obs, t.terminated, streams=t.env_index)
        for ep in runner.pop_episodes(): log(ep.score, ep.length)

    With a backend that resets in the next step, an environment that finished on the previous
    step spends this step resetting: its action is ignored and it contributes no row. Episode
    scores sum the raw (unclipped) rewards. An environment the backend rebuilt (it failed) gives no
    row either, and its episode so far is dropped: ``dropped`` lists those of the last step, so
    that whoever holds rows of the episode (n-step windows, a rollout) drops them too, and
    ``env_failures`` counts the failures. ``starts[i]`` is true where ``observations[i]`` begins an
    episode (after a reset, hidden or not, or a rebuild): where a recurrent policy zeroes its memory.
    """

    def __init__(self, backend: VectorBackend):
        self.backend = backend
        self.num_envs = backend.num_envs
        self.observations = backend.reset()
        self.starts = np.ones(self.num_envs, bool)
        self._resetting = np.zeros(self.num_envs, bool)
        self._hidden_resets = not backend.same_step_reset
        # The rows of a step in which every env stepped: built once, shared read-only by its transitions.
        self._all_rows = np.arange(self.num_envs, dtype=np.int64)
        self._all_rows.flags.writeable = False
        self._scores = np.zeros(self.num_envs, np.float64)
        self._lengths = np.zeros(self.num_envs, np.int64)
        self._finished: list[Episode] = []
        self.dropped: list[int] = []

    @property
    def env_failures(self) -> int:
        return self.backend.failures.count

    @property
    def observation_space(self) -> gym.Space:
        return self.backend.single_observation_space

    @property
    def action_space(self) -> gym.Space:
        return self.backend.single_action_space

    def step(self, actions: np.ndarray) -> Transitions:
        actions = np.asarray(actions)
        obs = self.observations
        next_obs, reward, raw, terminated, truncated, self.observations = self.backend.step(actions)
        done = terminated | truncated
        self.dropped = list(self.backend.broken)
        skipped: np.ndarray | None = self._resetting
        if self.dropped:
            skipped = self._resetting.copy()
            skipped[self.dropped] = True
            self._scores[self.dropped] = 0.0
            self._lengths[self.dropped] = 0
        elif not self._hidden_resets:
            skipped = None  # a backend that resets within the step skips none: no array to scan
        if skipped is None or not skipped.any():  # every env stepped: rows need no selecting
            self._scores += raw
            self._lengths += 1
            transitions = Transitions(obs, actions, reward, next_obs, terminated, truncated,
                                      self._all_rows)
        else:
            live = ~skipped
            self._scores[live] += raw[live]
            self._lengths[live] += 1
            done &= live
            rows = np.flatnonzero(live)
            transitions = Transitions(obs[rows], actions[rows], reward[rows], next_obs[rows], terminated[rows],
                                      truncated[rows], rows.astype(np.int64))
        if done.any():  # most steps end no episode: skip the bookkeeping
            # A lost life that ended a training episode while its game goes on (EnvPool's episodic
            # life) ends no scored episode: the score is the whole game's.
            goes_on = self.backend.game_goes_on
            scored = done if goes_on is None else done & ~goes_on
            for i in np.flatnonzero(scored):
                self._finished.append(Episode(float(self._scores[i]), int(self._lengths[i]), int(i)))
            self._scores[scored] = 0.0
            self._lengths[scored] = 0
        # The observations to act on next begin episodes where this step reset an env (a hidden reset,
        # a rebuild) or, resetting within the step, where it ended one.
        self.starts = np.zeros(self.num_envs, bool) if skipped is None else skipped.copy()
        if self._hidden_resets:
            self._resetting = done
        else:
            self.starts |= done
        return transitions

    def pop_episodes(self) -> list[Episode]:
        """Episodes finished since the last call, in the order they ended."""
        out, self._finished = self._finished, []
        return out

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> EnvRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_env_runner(env_id: str, num_envs: int, *, seed: int, training: bool,
                    terminal_on_life_loss: bool = False, backend: str = "auto") -> EnvRunner:
    """An :class:`EnvRunner` over ``num_envs`` copies of ``env_id``; environment ``i`` gets ``seed + i``.

    ``backend="auto"`` uses EnvPool for ``ALE/<Game>-v5`` ids where it is installed (``gorila[envpool]``),
    Gymnasium otherwise: EnvPool's Atari is as fast a core and runs in threads of its own, while for
    small envs such as CartPole a step's Python call costs as much as the env, and Gymnasium's envs
    can be saved with a local run's workers (EnvPool's cannot: ``--resume`` then starts them afresh).
    """
    validate.integer("num_envs", num_envs, low=1)
    validate.choice("env_backend", backend, BACKENDS)
    if backend == "envpool" and not envpool_supports(env_id):
        raise ConfigError("env_backend", f"envpool is not installed or has no task for {env_id!r}; "
                                         "use --env-backend gymnasium")
    if backend == "envpool" or (backend == "auto" and is_atari(env_id) and envpool_supports(env_id)):
        return EnvRunner(EnvPoolBackend(env_id, num_envs, seed=seed, training=training,
                                        terminal_on_life_loss=terminal_on_life_loss))
    fns = [_env_fn(env_id, seed + i, training, terminal_on_life_loss) for i in range(num_envs)]
    return EnvRunner(GymnasiumBackend(fns, env_id))


def _env_fn(env_id: str, seed: int, training: bool, terminal_on_life_loss: bool) -> Callable[[], gym.Env]:
    # a partial, not a lambda: a runner holding it can be saved (the local runtime's snapshot)
    return functools.partial(make_env, env_id, seed=seed, training=training,
                             terminal_on_life_loss=terminal_on_life_loss)
