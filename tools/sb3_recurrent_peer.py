"""SB3-contrib's RecurrentPPO with RL-Baselines3-Zoo's settings on CartPole without its velocities, timed to a
target score: the single-process recurrent peer that docs/algorithms.md sets gorila's LSTM agents beside.

It runs in a virtual environment of its own, so that gorila's never holds SB3 (tools/recurrent_acceptance.sh makes
one):

    python3 -m venv /tmp/sb3 && /tmp/sb3/bin/pip install torch==2.13.0 sb3-contrib
    /tmp/sb3/bin/python tools/sb3_recurrent_peer.py --target 475 --seed 0

The env is RL-Zoo's CartPoleNoVel-v1, as gorila/StatelessCartPole-v1 is: CartPole-v1 observed as the cart's
position and the pole's angle, 500 steps at most. The clock starts with the process, before the imports, as
gorila's ``time_to_target_s`` starts with its command. Every ``--eval-every`` env steps the policy plays 10
deterministic episodes (the most likely action, its LSTM state carried through each episode) on an env of its own;
the run stops at the first evaluation whose mean reaches ``--target``, after ``--total-steps`` (the zoo's 100 k), or
after ``--time-limit-s`` of training. The last line
printed is a JSON object: seconds from the process's start to that evaluation's end, env steps, and the score.
"""

from __future__ import annotations

import time

START = time.time()  # before the imports: gorila's time to target counts its command's imports too

import argparse  # noqa: E402
import json  # noqa: E402

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch.nn as nn  # noqa: E402
from gymnasium.envs.classic_control.cartpole import CartPoleEnv  # noqa: E402
from sb3_contrib import RecurrentPPO  # noqa: E402
from stable_baselines3.common.callbacks import BaseCallback, EvalCallback  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.vec_env import VecNormalize  # noqa: E402


def linear(start: float):  # RL-Zoo's lin_<value>: from start down to 0 over the run
    return lambda progress_remaining: progress_remaining * start


# hyperparams/ppo_lstm.yml of DLR-RM/rl-baselines3-zoo, CartPoleNoVel-v1 (normalize: true; 100 k steps there).
ZOO = dict(n_envs=8, ppo=dict(n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
                              learning_rate=linear(1e-3), clip_range=linear(0.2),
                              policy_kwargs=dict(ortho_init=False, activation_fn=nn.ReLU, lstm_hidden_size=64,
                                                 enable_critic_lstm=True, net_arch=dict(pi=[64], vf=[64]))),
           n_timesteps=100_000)


class CartPoleNoVel(CartPoleEnv):
    """CartPole observed without its velocities: ``(x, theta)``."""

    def __init__(self, render_mode: str | None = None) -> None:
        super().__init__(render_mode=render_mode)
        high = np.array([self.x_threshold * 2, self.theta_threshold_radians * 2], dtype=np.float32)
        self.observation_space = gym.spaces.Box(-high, high, dtype=np.float32)

    def reset(self, **kwargs):
        obs, info = super().reset(**kwargs)
        return np.array([obs[0], obs[2]], np.float32), info

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return np.array([obs[0], obs[2]], np.float32), reward, terminated, truncated, info


class _Deadline(BaseCallback):
    """Stops training once the wall clock passes the deadline."""

    def __init__(self, deadline: float) -> None:
        super().__init__()
        self.deadline = deadline

    def _on_step(self) -> bool:
        return time.time() < self.deadline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-every", type=int, default=4096, help="env steps between evaluations")
    parser.add_argument("--total-steps", type=int, default=ZOO["n_timesteps"])
    parser.add_argument("--time-limit-s", type=float, default=1800.0)
    args = parser.parse_args()
    gym.register("CartPoleNoVel-v1", entry_point=CartPoleNoVel, max_episode_steps=500)
    env = VecNormalize(make_vec_env("CartPoleNoVel-v1", n_envs=ZOO["n_envs"], seed=args.seed),
                       gamma=ZOO["ppo"]["gamma"])
    # EvalCallback copies the training statistics into the evaluation env before each evaluation.
    eval_env = VecNormalize(make_vec_env("CartPoleNoVel-v1", n_envs=1, seed=args.seed + 1000), training=False,
                            norm_reward=False)
    model = RecurrentPPO("MlpLstmPolicy", env, seed=args.seed, device="cpu", verbose=0, **ZOO["ppo"])
    reached: dict[str, float] = {}

    class _Judge(BaseCallback):
        def _on_step(self) -> bool:
            score = float(self.parent.last_mean_reward)
            print(json.dumps({"t_s": round(time.time() - START, 2), "env_steps": self.num_timesteps,
                              "eval": round(score, 2)}), flush=True)
            if score >= args.target:
                reached.update(seconds=time.time() - START, env_steps=self.num_timesteps, score=score)
                return False
            return True

    judge = EvalCallback(eval_env, n_eval_episodes=10, eval_freq=max(args.eval_every // ZOO["n_envs"], 1),
                         deterministic=True, callback_after_eval=_Judge(), verbose=0)
    # the limit is on training, as gorila's --time-limit-s is
    model.learn(total_timesteps=args.total_steps, callback=[judge, _Deadline(time.time() + args.time_limit_s)])
    print(json.dumps({"env": "CartPoleNoVel-v1", "seed": args.seed, "target": args.target, "reached": bool(reached),
                      "seconds": round(reached.get("seconds", time.time() - START), 2),
                      "env_steps": int(reached.get("env_steps", model.num_timesteps)),
                      "score": reached.get("score"), "best": float(judge.best_mean_reward),
                      "gym": gym.__version__}))


if __name__ == "__main__":
    main()
