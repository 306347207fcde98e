"""Evaluate a greedy policy with null-op starts, and put Atari scores on the human-normalized scale."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import cache
from importlib import resources

import numpy as np

from gorila import validate
from gorila.envs.make import make_env
from gorila.errors import ConfigError


def evaluate(policy_fn: Callable[[np.ndarray], np.ndarray], env_id: str, episodes: int, epsilon: float,
             seed: int, noop_max: int = 30) -> list[float]:
    """Unclipped returns of ``episodes`` episodes played ε-greedily with ``policy_fn``::

        scores = evaluate(lambda obs: q(torch.as_tensor(obs)).argmax(1).numpy(),
                          "ALE/Pong-v5", episodes=30, epsilon=0.05, seed=123)

    ``policy_fn`` maps a batch of observations to greedy actions. Each episode starts with a random
    number (0..``noop_max``) of no-op actions (action 0) — the "null-op starts" of the DQN and
    Gorila papers — which makes the start state vary even for deterministic games. Their rewards
    count toward the return. Envs whose action 0 is not a no-op (CartPole's is "push left") get
    none: see :func:`has_noop`. The environment is built with ``training=False``: real rewards, no
    end on a life loss; the Atari preprocessing's own no-ops are turned off so they are not doubled.
    """
    validate.integer("eval_episodes", episodes, low=1)
    validate.number("eval_epsilon", epsilon, low=0.0, high=1.0)
    validate.integer("noop_max", noop_max, low=0)
    # All episodes run side by side, so the policy sees one batch per step instead of one
    # observation per step per episode.
    envs = [make_env(env_id, seed=seed + i, training=False, noop_max=0) for i in range(episodes)]
    n_actions = envs[0].action_space.n
    if not has_noop(envs[0]):
        noop_max = 0  # action 0 is a real move (CartPole: push left), not "do nothing"
    rng = np.random.default_rng(seed)
    returns = np.zeros(episodes)
    live = np.ones(episodes, bool)
    try:
        obs = []
        for i, env in enumerate(envs):
            o, _ = env.reset(seed=seed + i)
            for _ in range(int(rng.integers(0, noop_max + 1))):
                o, reward, terminated, truncated, _ = env.step(0)
                returns[i] += float(reward)
                if terminated or truncated:
                    live[i] = False
                    break
            obs.append(o)
        while live.any():
            idx = np.flatnonzero(live)
            explore = rng.random(len(idx)) < epsilon
            actions = rng.integers(n_actions, size=len(idx))
            if not explore.all():
                greedy = np.asarray(policy_fn(np.stack([obs[i] for i in idx[~explore]])))
                actions[~explore] = greedy
            for i, action in zip(idx, actions):
                obs[i], reward, terminated, truncated, _ = envs[i].step(int(action))
                returns[i] += float(reward)
                live[i] = not (terminated or truncated)
    finally:
        for env in envs:
            env.close()
    return [float(r) for r in returns]


def has_noop(env) -> bool:
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
    table = _scores()
    key = _game_key(game_id)
    if key not in table:
        raise ConfigError("env", f"no published random/human scores for {game_id!r}; "
                                 f"known games: {', '.join(sorted(table))}")
    random, human = table[key]
    return 100.0 * (score - random) / (human - random)


def _game_key(game_id: str) -> str:
    name = game_id.split("/")[-1]
    name = re.sub(r"(NoFrameskip|Deterministic)?-v\d+$", "", name)
    return name.replace("_", "").replace("-", "").lower()


@cache
def _table() -> dict:
    return json.loads(resources.files("gorila").joinpath("data/atari_scores.json").read_text())


@cache
def _scores() -> dict[str, tuple[float, float]]:
    return {_game_key(name): (g["random"], g["human"]) for name, g in _table()["games"].items()}


#: Where the random and human scores come from (written into summaries beside normalized scores).
NORMALIZATION_SOURCE = _table()["source"]
