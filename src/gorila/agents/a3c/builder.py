"""Build the A3C / A2C plan: the same workers under every update rule.

This is where :class:`~gorila.agents.a3c.config.A3CConfig` is read; the workers get explicit
arguments (an :class:`~gorila.agents.a3c.loss.A3CLoss`, an :class:`~gorila.envs.spec.EnvSpec`), and the
plan is composed from the parts of :mod:`gorila.agents.kit`.
"""

from __future__ import annotations

import functools
from dataclasses import asdict

from gorila.agents.a3c.config import A3CConfig
from gorila.agents.a3c.learner import A3CWorker
from gorila.agents.a3c.loss import A3CLoss
from gorila.agents.kit import CHUNK_SECONDS, INFERENCE, inference_service, rl_plan
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig
from gorila.driver.plan import Plan, ServiceSpec, WorkerSpec
from gorila.envs.make import env_spaces
from gorila.inference.policies import SampledPolicy
from gorila.nets.actor_critic_env import EvaluationPolicy, evaluation_policy_for, learning_rates
from gorila.nets.numpy_policy import numpy_policy

STEPS_PER_CHUNK = 20
# Central inference: batches between the server's pulls. A worker pulls before every rollout, so
# the server refreshes about as often: once per rollout step of every worker's two groups.
REFRESH_EVERY = 2


def make_plan(run: RunConfig, cfg: A3CConfig, rl: RLConfig) -> Plan:
    """``--workers`` A3C workers; under ``sync`` they are A2C, under ``semi-async`` the semi-asynchronous
    rule's variant."""
    network_fn, policy_fn = evaluation_policy(run, cfg, rl)
    net = network_fn()  # an unsupported env is refused here, before anything starts
    envs = rl.env_spec(cfg.envs_per_actor)
    observation_space = env_spaces(rl.env)[0]
    central = rl.central_inference(observation_space, runtime=run.runtime)
    normalize = rl.normalization(observation_space, cfg.gamma)
    worker = functools.partial(
        A3CWorker, envs=envs, network_fn=network_fn,
        loss=A3CLoss(cfg.gamma, cfg.entropy_coef, cfg.gae_lambda, cfg.max_grad_norm),
        rollout_steps=cfg.unroll_length, target_tau=cfg.target_tau, seed=run.seed,
        timeout_s=run.call_timeout(CHUNK_SECONDS), straggler=cfg.straggler, normalize=normalize)
    inference: tuple[ServiceSpec, ...] = ()
    if central:  # the server samples a ~ pi(.|s) with the parameters it last pulled
        # A3C's workers compute their gradients on the CPU: only the inference server asks for a GPU.
        _, server_gpus = rl.gpu_shares(run.runtime, 0, central)
        policy = functools.partial(SampledPolicy, network_fn, device=rl.server_device(run.runtime), seed=run.seed)
        inference = (inference_service(policy, rl.batching_rule(cfg.workers * cfg.envs_per_actor), REFRESH_EVERY,
                                       server_gpus),)

    def groups(services: dict) -> list[WorkerSpec]:
        endpoint = services[INFERENCE][0] if central else None
        # Workers spread over the nodes; with central inference they must share the server's node.
        return [WorkerSpec("worker", functools.partial(worker, inference=endpoint), cfg.workers, spread=not central)]

    return rl_plan(
        run, rl, algo="a3c", net=net, network_fn=network_fn, policy_fn=policy_fn, eval_numpy=numpy_policy(net),
        eval_epsilon=cfg.EVAL_EPSILON, eval_every_s=cfg.EVAL_EVERY_S,
        central=central, config=asdict(cfg),
        # policy and value parameters keep their own learning rates
        spec=run.server_spec(run.rule(num_workers=cfg.workers), cfg.optimizer,
                             learning_rates(net, cfg.lr_policy, cfg.lr_value)),
        groups=groups, services=inference, processes=cfg.workers + len(inference),
        # A rollout to the episodes' ends may take minutes (Atari): the first chunk is one rollout, and
        # the driver's pacing grows it toward its chunk time from there.
        chunk_steps=lambda updates: STEPS_PER_CHUNK if cfg.unroll_length else 1,
        metrics=("worker.policy_lag_mean",), histograms=("worker.policy_lag",), cache_readers="worker",
        normalized=("worker",) if normalize is not None else ())


def evaluation_policy(run: RunConfig, cfg: A3CConfig, rl: RLConfig) -> EvaluationPolicy:
    """``(network_fn, policy_fn)`` for ``gorila eval``: the architecture and its greedy policy. The
    network function binds only what shapes the network, so workers receive a few numbers."""
    return evaluation_policy_for(rl.env, cfg, run.seed, "a3c")
