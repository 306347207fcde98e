"""Build the A3C / A2C plan: the same workers under every update rule.

This is where :class:`~gorila.algos.a3c.config.A3CConfig` is read; the workers get explicit
arguments (an :class:`~gorila.losses.a3c.A3CLoss`, an :class:`~gorila.envs.spec.EnvSpec`).
"""

from __future__ import annotations

import functools
from dataclasses import asdict

from gorila.algos.a3c.config import A3CConfig
from gorila.algos.a3c.networks import greedy_policy, learning_rates, make_network
from gorila.config import RunConfig
from gorila.driver.plan import Budget, Plan, WorkerSpec
from gorila.driver.policy_evaluation import PolicyEvaluation
from gorila.driver.rl_config import RLConfig
from gorila.envs.spec import EnvSpec
from gorila.inference import SERVICE as INFERENCE
from gorila.inference import inference_service
from gorila.inference.policies import SampledPolicy
from gorila.learners.a3c import A3CWorker
from gorila.losses.a3c import A3CLoss
from gorila.nets import FlatParams

EVAL_EPSILON = 0.0  # a policy-gradient method is judged by its greedy policy
STEPS_PER_CHUNK = 20
CHUNK_SECONDS = 0.5  # how long a chunk lasts once sized to the workers' speed
# Central inference: batches between the server's pulls. A worker pulls before every rollout, so
# the server refreshes about as often: once per rollout step of every worker's two groups.
REFRESH_EVERY = 2
INFERENCE_METRICS = ("inference.mean_batch", "inference.dropped")


def make_plan(run: RunConfig, cfg: A3CConfig, rl: RLConfig) -> Plan:
    """``--workers`` A3C workers; under ``sync`` they are A2C, under ``semi-async`` seed 002's variant."""
    network_fn, policy_fn = evaluation_policy(run, cfg, rl)
    net = network_fn()  # an unsupported env is refused here, before anything starts
    envs = EnvSpec(rl.env, cfg.envs_per_worker)
    with EnvSpec(rl.env).runner(run.seed) as runner:
        central = rl.central_inference(runner.observation_space)
    worker = functools.partial(
        A3CWorker, envs=envs, network_fn=network_fn,
        loss=A3CLoss(cfg.gamma, cfg.entropy_coef, cfg.gae_lambda, cfg.max_grad_norm),
        rollout_steps=cfg.rollout_steps, target_tau=cfg.target_tau, seed=run.seed, timeout_s=run.call_timeout_s,
        straggler=cfg.straggler)
    inference = ()
    if central:  # the server samples a ~ pi(.|s) with the parameters it last pulled
        policy = functools.partial(SampledPolicy, network_fn, device=rl.server_device(), seed=run.seed)
        inference = (inference_service(policy, rl.batching_rule(cfg.workers * cfg.envs_per_worker), REFRESH_EVERY),)

    def groups(services: dict) -> list[WorkerSpec]:
        endpoint = services[INFERENCE][0] if central else None
        return [WorkerSpec("worker", functools.partial(worker, inference=endpoint), cfg.workers)]

    epsilon = rl.eval_epsilon if rl.eval_epsilon is not None else EVAL_EPSILON
    return Plan(
        algo="a3c", label=rl.env, initial_params=lambda: FlatParams(net).get(),
        # policy and value parameters keep their own learning rates
        spec=run.server_spec(run.rule(num_workers=cfg.workers), cfg.optimizer, learning_rates(net, cfg)),
        groups=groups, services=inference,
        evaluation=PolicyEvaluation(rl.env, network_fn, policy_fn, episodes=rl.eval_episodes, epsilon=epsilon,
                                    seed=run.seed, noop_max=rl.eval_noop_max, every_s=rl.eval_every_s,
                                    target=rl.target()),
        budget=Budget(rl.total_steps, "env_steps"), processes=cfg.workers + len(inference),
        chunk_steps=lambda updates: STEPS_PER_CHUNK, chunk_seconds=CHUNK_SECONDS,
        stop_at_target=rl.stop_at_target, metrics=("worker.policy_lag_mean", *(INFERENCE_METRICS if central else ())), histograms=("worker.policy_lag",),
        config={**asdict(cfg), **asdict(rl), "eval_epsilon": epsilon, "inference": "central" if central else "local"},
        network_fn=network_fn)


def evaluation_policy(run: RunConfig, cfg: A3CConfig, rl: RLConfig):
    """``(network_fn, policy_fn)`` for ``gorila eval``: the architecture and its greedy policy."""
    return functools.partial(make_network, rl.env, cfg, run.seed), greedy_policy
