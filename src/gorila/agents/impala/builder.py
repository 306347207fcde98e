"""Build the IMPALA plan: actors → trajectory queues → learners, on the parameter server::

    actor k (own actor-critic copy, ──add segment──► queue k % L ──take batch──► learner j = queue j
             log mu(a|x) per step)    (FIFO, bounded,        (drops segments    │ V-trace gradient, push
       ▲ pull every --actor-refresh segments   back-pressure) --max-policy-lag)  ▼
       └──────────────────────────────────── parameter server ◄──────────────────┘

This is where :class:`~gorila.agents.impala.config.ImpalaConfig` is read; the networks are the actor-critics' of
:mod:`gorila.nets.actor_critic_env`.
"""

from __future__ import annotations

import functools
from dataclasses import asdict

from gorila.actors.segment_actor import SegmentActor
from gorila.agents.impala.config import ImpalaConfig
from gorila.agents.impala.learner import ImpalaLearner
from gorila.agents.impala.loss import ImpalaLoss
from gorila.agents.kit import (
    ACTOR_TIME,
    QUEUES,
    check_sync_learners,
    learner_factory,
    rl_plan,
    sampled_inference,
    shipped_network_fn,
    trajectory_groups,
)
from gorila.agents.rl_config import RLConfig, resolve_device
from gorila.config import RunConfig
from gorila.driver.plan import Plan, ServiceSpec
from gorila.envs.make import env_spaces
from gorila.nets.actor_critic_env import EvaluationPolicy, evaluation_policy_for
from gorila.nets.numpy_policy import numpy_policy
from gorila.nets.recurrent import RecurrentActorCritic
from gorila.trajectory import TrajectoryQueue

STEPS_PER_CHUNK = 4
METRICS = ("trajectories.size", "trajectories.dropped_stale", "trajectories.refused", "learner.policy_lag_mean",
           "learner.rho_mean", "learner.entropy", "learner.wait_fraction", *ACTOR_TIME)


def make_plan(run: RunConfig, cfg: ImpalaConfig, rl: RLConfig) -> Plan:
    """``--actors`` actors, one trajectory queue per learner, ``--learners`` learners."""
    network_fn, policy_fn = evaluation_policy(run, cfg, rl)
    net = network_fn()  # an unsupported env is refused here, before anything starts
    central = rl.inference == "central"  # auto means local here, whatever the observations and devices
    envs = rl.env_spec(cfg.envs_per_actor)
    normalize = rl.normalization(env_spaces(rl.env)[0], cfg.gamma)
    twin = numpy_policy(net)  # the actors and the evaluator play it without torch, where the network has one
    # --core lstm: each env's core state, carried by its actor (or the inference server)
    state_shape = net.state_shape if isinstance(net, RecurrentActorCritic) else ()
    actor = functools.partial(SegmentActor, envs=envs, network_fn=shipped_network_fn(network_fn, twin),
                              unroll_length=cfg.unroll_length, refresh_every=cfg.actor_refresh, gamma=cfg.gamma,
                              seed=run.seed, normalize=normalize, numpy_policy=twin, state_shape=state_shape)
    loss = ImpalaLoss(cfg.gamma, cfg.entropy_coef, cfg.value_coef, cfg.rho_bar, cfg.c_bar, cfg.pg_rho_bar,
                      vtrace=cfg.vtrace == "on", max_grad_norm=cfg.max_grad_norm)
    rule = run.rule(num_workers=cfg.learners)
    check_sync_learners(run, cfg.learners)
    learner_gpus, server_gpus = rl.gpu_shares(run.runtime, cfg.learners, central)
    spec = run.server_spec(rule, cfg.optimizer, cfg.lr, learners=cfg.learners)
    learner = learner_factory(functools.partial(ImpalaLearner, network_fn=network_fn, loss=loss,
                                                batch_size=cfg.batch_size,
                                                device=resolve_device(rl.device, runtime=run.runtime)),
                              run, spec, cfg.learners)
    queue = functools.partial(TrajectoryQueue, capacity=cfg.queue_capacity, max_policy_lag=cfg.max_policy_lag)
    # Central inference: a segment is 2 x --unroll-length batches (the groups alternate), so the
    # server pulling every that many x --actor-refresh batches keeps --actor-refresh's policy lag.
    inference = (sampled_inference(network_fn, rl, cfg.actors * cfg.envs_per_actor,
                                   2 * cfg.unroll_length * cfg.actor_refresh, run.seed, run.runtime,
                                   server_gpus, recurrent=bool(state_shape)),) if central else ()

    return rl_plan(
        run, rl, algo="impala", net=net, network_fn=network_fn, policy_fn=policy_fn, eval_numpy=twin,
        eval_epsilon=cfg.EVAL_EPSILON, eval_every_s=cfg.EVAL_EVERY_S,
        central=central, config=asdict(cfg),
        spec=spec,
        groups=trajectory_groups(actor, learner, cfg.actors, cfg.learners, central, learner_gpus),
        services=(ServiceSpec(QUEUES, queue, cfg.learners), *inference),
        processes=cfg.actors + 2 * cfg.learners + len(inference), chunk_steps=lambda updates: STEPS_PER_CHUNK,
        metrics=METRICS, histograms=("learner.policy_lag",), normalized=("actor",) if normalize is not None else ())


def evaluation_policy(run: RunConfig, cfg: ImpalaConfig, rl: RLConfig) -> EvaluationPolicy:
    """``(network_fn, policy_fn)`` for evaluation and ``gorila eval``: the architecture and its greedy policy."""
    return evaluation_policy_for(rl.env, cfg, run.seed, "impala")
