"""Stable-Baselines3's PPO with RL-Baselines3-Zoo's settings, timed to a target score: the peer that
docs/continuous.md sets gorila's continuous-control figures beside.

It runs in a virtual environment of its own, so that gorila's never holds SB3:

    python3.11 -m venv /tmp/sb3 && /tmp/sb3/bin/pip install torch==2.13.0 \
        stable-baselines3 "gymnasium[box2d,mujoco]"
    /tmp/sb3/bin/python tools/sb3_peer.py --env LunarLanderContinuous-v3 --target 200 --seed 0

The clock starts after the imports. Every ``--eval-every`` env steps (default: 4,096 on Pendulum, 16,384
elsewhere) the policy plays 10 deterministic episodes (the mean action) on an env of its own; the run stops at
the first evaluation whose mean reaches ``--target``, or at ``--time-limit-s``. The last line printed is a
JSON object: seconds from the clock's start to that evaluation's end, env steps, and the score.
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
import torch.nn as nn
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback, EvalCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

# hyperparams/ppo.yml of DLR-RM/rl-baselines3-zoo; the -v2/-v3 entries there are these envs' earlier versions.
ZOO = {
    "Pendulum-v1": dict(
        n_envs=4, normalize=False,
        ppo=dict(n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10, ent_coef=0.0, learning_rate=1e-3,
                 clip_range=0.2, use_sde=True, sde_sample_freq=4)),
    "LunarLanderContinuous-v3": dict(
        n_envs=16, normalize=False,
        ppo=dict(n_steps=1024, batch_size=64, gae_lambda=0.98, gamma=0.999, n_epochs=4, ent_coef=0.01)),
    "HalfCheetah-v5": dict(
        n_envs=1, normalize=True,
        ppo=dict(batch_size=64, n_steps=512, gamma=0.98, learning_rate=2.0633e-05, ent_coef=0.000401762,
                 clip_range=0.1, n_epochs=20, gae_lambda=0.92, max_grad_norm=0.8, vf_coef=0.58096,
                 policy_kwargs=dict(log_std_init=-2, ortho_init=False, activation_fn=nn.ReLU,
                                    net_arch=dict(pi=[256, 256], vf=[256, 256])))),
}


class _Deadline(BaseCallback):
    """Stops training once the wall clock passes the deadline."""

    def __init__(self, deadline: float) -> None:
        super().__init__()
        self.deadline = deadline

    def _on_step(self) -> bool:
        return time.perf_counter() < self.deadline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", required=True, choices=sorted(ZOO))
    parser.add_argument("--target", type=float, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-every", type=int, default=None, help="env steps between evaluations")
    parser.add_argument("--time-limit-s", type=float, default=1800.0)
    args = parser.parse_args()
    start = time.perf_counter()
    zoo = ZOO[args.env]
    every = args.eval_every or (4096 if args.env == "Pendulum-v1" else 16384)
    env = make_vec_env(args.env, n_envs=zoo["n_envs"], seed=args.seed)
    eval_env = make_vec_env(args.env, n_envs=1, seed=args.seed + 1000)
    if zoo["normalize"]:
        # EvalCallback copies the training statistics into the evaluation env before each evaluation.
        env = VecNormalize(env, gamma=zoo["ppo"]["gamma"])
        eval_env = VecNormalize(eval_env, training=False, norm_reward=False)
    model = PPO("MlpPolicy", env, seed=args.seed, device="cpu", verbose=0, **zoo["ppo"])
    reached: dict[str, float] = {}

    class _Judge(BaseCallback):
        def _on_step(self) -> bool:
            score = float(self.parent.last_mean_reward)
            print(json.dumps({"t_s": round(time.perf_counter() - start, 2), "env_steps": self.num_timesteps,
                              "eval": round(score, 2)}), flush=True)
            if score >= args.target:
                reached.update(seconds=time.perf_counter() - start, env_steps=self.num_timesteps, score=score)
                return False
            return True

    judge = EvalCallback(eval_env, n_eval_episodes=10, eval_freq=max(every // zoo["n_envs"], 1),
                         deterministic=True, callback_after_eval=_Judge(), verbose=0)
    model.learn(total_timesteps=10**8, callback=[judge, _Deadline(start + args.time_limit_s)])
    print(json.dumps({"env": args.env, "seed": args.seed, "target": args.target, "reached": bool(reached),
                      "seconds": round(reached.get("seconds", time.perf_counter() - start), 2),
                      "env_steps": int(reached.get("env_steps", model.num_timesteps)),
                      "score": reached.get("score"), "gym": gym.__version__}))


if __name__ == "__main__":
    main()
