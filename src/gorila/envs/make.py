"""Build one Gymnasium environment by id, with the DQN preprocessing for Atari games."""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib
import logging
import sys
from collections.abc import Iterator, Sequence
from importlib import metadata
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

from gorila.errors import ConfigError

#: Key under which :class:`SignReward` leaves the unclipped reward in ``info``.
RAW_REWARD = "raw_reward"

ATARI_FRAME_STACK = 4
ATARI_FRAME_SKIP = 4
#: No-op frames at an Atari reset: 1..30, as the DQN papers (training's envs and evaluation's alike).
ATARI_NOOP_MAX = 30
#: The longest Atari episode, in agent steps: ALE v5's cap of 108,000 frames at frame skip 4.
ATARI_MAX_STEPS = 27_000

_log = logging.getLogger(__name__)


def is_atari(env_id: str) -> bool:
    """True for the ALE namespace (``ALE/Pong-v5``), the ids that get DQN preprocessing."""
    return env_id.startswith("ALE/")


def is_minatar(env_id: str) -> bool:
    """True for the MinAtar namespace (``MinAtar/Breakout-v1``), whose grids are turned channels-first."""
    return env_id.startswith("MinAtar/")


class ChannelsFirst(gym.ObservationWrapper):
    """MinAtar's ``(10, 10, C)`` boolean grid as ``(C, 10, 10)``, the layout of torch's convolutions::

        env = ChannelsFirst(gym.make("MinAtar/Breakout-v1"))   # obs (4, 10, 10) bool

    The cells stay booleans (a byte each on the wire, a bit in replay); networks cast them to float.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Box):
            raise TypeError(f"ChannelsFirst needs a Box of observations, got {space}")
        height, width, channels = space.shape
        self.observation_space = gym.spaces.Box(0, 1, (channels, height, width), dtype=bool)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        # transpose: np.moveaxis's axis checks cost several times the copy, on every env step.
        return observation.transpose(2, 0, 1).astype(np.bool_, order="C")


class SignReward(gym.Wrapper):
    """Replaces each reward by its sign (DQN's reward clipping) and keeps the original in ``info``::

        env = SignReward(env)
        _, r, _, _, info = env.step(a)    # r in {-1, 0, 1}; info["raw_reward"] is the game's reward

    Training sees clipped rewards so one learning rate suits every game; statistics and
    evaluation need the real score, hence the copy in ``info``.
    """

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:  # Any: the wrapped env's
        obs, reward, terminated, truncated, info = self.env.step(action)
        info = dict(info)
        raw = float(reward)
        info[RAW_REWARD] = raw
        return obs, float(np.sign(raw)), terminated, truncated, info


def make_env(env_id: str, *, seed: int, training: bool, terminal_on_life_loss: bool = False,
             noop_max: int = ATARI_NOOP_MAX, render_mode: str | None = None) -> gym.Env:
    """One environment for ``env_id``, reset with ``seed``; later ``reset()`` calls continue its RNG::

        env = make_env("CartPole-v1", seed=0, training=True)
        env = make_env("ALE/Pong-v5", seed=1, training=True)    # obs (4, 84, 84) uint8

    Any registered Gymnasium id works as it is. ``ALE/<Game>-v5`` ids get the preprocessing of
    Mnih et al. (2015): sticky actions off (``repeat_action_probability=0``; v5 defaults to 0.25,
    which the DQN papers did not use), ``frameskip=1`` in the emulator so that
    ``AtariPreprocessing`` skips 4 frames with max-pooling over the last two, 84×84 grayscale,
    1..``noop_max`` no-op frames at reset, and a stack of the last 4 frames. With
    ``training=True`` rewards are clipped to their sign (:class:`SignReward`; the raw reward
    stays in ``info["raw_reward"]``) and ``terminal_on_life_loss`` may end an episode when a
    life is lost — note that Gymnasium then resets the whole game, not just the life.
    Evaluation (``training=False``) never clips and never ends on a life loss. ``MinAtar/<Game>-v1``
    ids (the optional ``minatar`` package, registered on demand through its own ``gymnasium.envs``
    entry point; gorila never imports it) give ``(C, 10, 10)`` boolean grids (:class:`ChannelsFirst`)
    with the game's own sticky actions and unclipped rewards, as Young & Tian (2019). Other ids ignore
    ``training``, ``terminal_on_life_loss`` and ``noop_max``. ``render_mode`` is Gymnasium's
    (``"rgb_array"`` to record videos).
    """
    # Only passed when asked for: some envs' constructors take no render_mode at all.
    rendering = {} if render_mode is None else {"render_mode": render_mode}
    if is_atari(env_id):
        env = _make_atari(env_id, training=training, terminal_on_life_loss=terminal_on_life_loss,
                          noop_max=noop_max, **rendering)
    elif is_minatar(env_id):
        env = ChannelsFirst(_make(env_id, **rendering))
    else:
        env = _make(env_id, **rendering)
    env.action_space.seed(seed)
    env.reset(seed=seed)
    return env


@functools.lru_cache(maxsize=None)
def env_spaces(env_id: str) -> tuple[gym.Space, gym.Space]:
    """The observation and action spaces of ``env_id`` as :func:`make_env` builds it (an Atari
    game's stacked frames), read from one env made once per process: a run builds its networks
    from them several times, and each Atari env made loads the game's ROM (about 0.2 s). The
    spaces are shared: read them, do not seed or change them."""
    env = make_env(env_id, seed=0, training=False)
    try:
        return env.observation_space, env.action_space
    finally:
        close_env(env, env_id)


def close_env(env: gym.Env, what: str) -> None:
    """Close ``env`` (``what`` names it in the log); an error its ``close()`` raises is logged and
    ignored: an env that is done with cannot hold a run up, before training or after it."""
    try:
        env.close()
    except Exception as err:  # any failure of the env's own code
        _log.warning("%s: closing it raised %s: %s (ignored)", what, type(err).__name__, err)


def _make_atari(env_id: str, *, training: bool, terminal_on_life_loss: bool, noop_max: int,
                **rendering: str) -> gym.Env:
    try:
        import ale_py
    except ImportError as e:
        raise ConfigError("env", f"{env_id} needs ale-py: pip install 'gorila[atari]'") from e
    gym.register_envs(ale_py)
    # The emulator's banner (logged at Info) on every env made would drown the run's own lines.
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Warning)
    env = _make(env_id, frameskip=1, repeat_action_probability=0.0, **rendering)
    env = AtariPreprocessing(env, noop_max=noop_max, frame_skip=ATARI_FRAME_SKIP, screen_size=84,
                             terminal_on_life_loss=training and terminal_on_life_loss,
                             grayscale_obs=True)
    env = FrameStackObservation(env, ATARI_FRAME_STACK)
    return SignReward(env) if training else env


#: What MinAtar's package imports only to draw its games: matplotlib, and seaborn, which brings
#: SciPy (3.9 s of one core here, in every process that makes a MinAtar env: on 2 cores a run's
#: actors, learner and evaluator starting together lost seconds to it). MinAtar treats them as
#: optional; a process that draws (``render_mode``, ``gorila eval --video``) imports them.
MINATAR_DRAWING = ("matplotlib", "seaborn")


def _register_namespace(env_id: str, draws: bool = False) -> None:
    """Register the ids of ``env_id``'s namespace from the package that provides it, if it is not
    registered yet: Gymnasium 1.x no longer loads its ``gymnasium.envs`` entry points itself, and
    gorila does not import providers such as ``minatar`` (GPL-3) at module level. MinAtar is
    imported without its drawing libraries unless this process ``draws`` its games (or has
    imported them already)."""
    namespace, _, _ = env_id.rpartition("/")
    if namespace == "MinAtar" and draws:
        _minatar_with_drawing()
    if not namespace or any(spec.namespace == namespace for spec in gym.registry.values()):
        return
    for entry in metadata.entry_points(group="gymnasium.envs", name=namespace):
        with _without_modules(MINATAR_DRAWING if namespace == "MinAtar" else ()):
            entry.load()()
        return
    if namespace == "MinAtar":
        raise ConfigError("env", f"{env_id} needs the MinAtar package (GPL-3): pip install 'gorila[minatar]'")


@contextlib.contextmanager
def _without_modules(names: Sequence[str]) -> Iterator[None]:
    """While the block runs, importing any of ``names`` not imported yet raises ImportError (a
    ``None`` entry in ``sys.modules``, as Python's import system documents), and the warning a
    package logs for a missing optional import is not shown (nor does it configure logging)."""
    absent = [name for name in names if name not in sys.modules]
    if not absent:
        yield
        return
    handlers, disabled = list(logging.root.handlers), logging.root.manager.disable
    for name in absent:
        sys.modules[name] = None  # type: ignore[assignment]
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(disabled)
        logging.root.handlers[:] = handlers  # a module-level logging.warning() adds one otherwise
        for name in absent:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]


def _minatar_with_drawing() -> None:
    """MinAtar's modules as they are with their drawing libraries: imported again if this process
    imported them without (a MinAtar env made earlier, then one that renders frames)."""
    modules = [sys.modules.get(name) for name in ("minatar.environment", "minatar.gym")]
    if all(module is None or hasattr(module, "sns") for module in modules):
        return
    for module in modules:
        if module is not None:
            importlib.reload(module)


def _make(env_id: str, **kwargs: Any) -> gym.Env:
    _register_namespace(env_id, draws=kwargs.get("render_mode") is not None)
    try:
        return gym.make(env_id, **kwargs)
    except gym.error.DependencyNotInstalled as e:
        raise ConfigError("env", f"{env_id} needs an optional dependency: {e}") from e
    except ImportError as e:  # "module:Id" imports the module that registers Id first
        module = env_id.partition(":")[0] if ":" in env_id else None
        what = f"its module {module!r} does not import" if module else "it needs a module that does not import"
        raise ConfigError("env", f"{env_id}: {what} ({e})") from e
    except gym.error.Error as e:
        close = difflib.get_close_matches(env_id, list(gym.registry), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else (
            "; use a registered Gymnasium id such as CartPole-v1 or ALE/Pong-v5")
        raise ConfigError("env", f"unknown environment {env_id!r} ({e}){hint}") from e
