"""Build the PPO / APPO plan: IMPALA's actors → trajectory queues → learners, with PPO learners::

    actor k ──segment──► queue k % L ──batch──► PPO learner j: advantages on the pulled parameters, then
       ▲ pull every segment                      epochs x minibatches of the clipped surrogate, each pushed
       └───────────────────── parameter server ◄─┘

``--mode sync`` is the classic synchronous PPO (GAE advantages; a batch is one segment of every
actor of the learner's queue, all acted on the learner's version, one learner step per round: on
the local runtime the groups' turns make the rounds, on Ray each actor waits, before its next
segment, for the server to be ``--epochs`` x ``--minibatches`` updates past its last one); any
other mode is APPO (V-trace advantages under the clip, segments of older policies corrected by
pi / mu, actors never waiting, their lag bounded by ``--max-policy-lag``). This is where
:class:`~gorila.agents.ppo.config.PPOConfig` is read; the networks are the actor-critics' of
:mod:`gorila.nets.actor_critic_env`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict

from gorila.actors.segment_actor import SegmentActor
from gorila.agents.kit import (
    ACTOR_TIME,
    CHUNK_SECONDS,
    QUEUES,
    check_sync_learners,
    learner_factory,
    rl_plan,
    sampled_inference,
    shipped_network_fn,
    trajectory_groups,
)
from gorila.agents.ppo.config import PPOConfig
from gorila.agents.ppo.learner import PPOLearner
from gorila.agents.ppo.loss import PPOLoss
from gorila.agents.rl_config import RLConfig, resolve_device
from gorila.config import RunConfig
from gorila.driver.plan import Plan, ServiceSpec
from gorila.envs.make import env_spaces
from gorila.errors import ConfigError
from gorila.nets.actor_critic_env import EvaluationPolicy, evaluation_policy_for
from gorila.nets.numpy_policy import numpy_policy
from gorila.nets.recurrent import RecurrentActorCritic
from gorila.params import UpdateRule
from gorila.params.learning_rate import LinearDecay
from gorila.trajectory import TrajectoryQueue

STEPS_PER_CHUNK = 2
METRICS = ("trajectories.size", "trajectories.dropped_stale", "learner.policy_lag_mean", "learner.entropy",
           "learner.wait_fraction", *ACTOR_TIME)


def make_plan(run: RunConfig, cfg: PPOConfig, rl: RLConfig) -> Plan:
    """``--actors`` actors, one trajectory queue per learner, ``--learners`` PPO learners."""
    network_fn, policy_fn = evaluation_policy(run, cfg, rl)
    net = network_fn()
    central = rl.inference == "central"  # auto means local here, whatever the observations and devices
    if cfg.learners > cfg.actors:
        raise ConfigError("learners", f"each learner needs an actor of its own: at most --actors ({cfg.actors})")
    rule = run.rule(num_workers=cfg.learners)
    check_sync_learners(run, cfg.learners)
    in_turns = run.runtime == "local"
    rounds = rule.barrier and not in_turns
    if rounds and cfg.batch_size not in (None, cfg.actors):
        raise ConfigError("batch_size", f"--mode sync on Ray learns from one segment of every actor a round: "
                                        f"leave it out or give --actors ({cfg.actors}); or use --mode async")
    loss = PPOLoss(cfg.gamma, cfg.gae_lambda, cfg.clip, cfg.value_coef, cfg.entropy_coef, cfg.value_clip,
                   cfg.normalize_advantages, "gae" if run.mode == "sync" else "vtrace", cfg.rho_bar, cfg.rho_bar,
                   cfg.max_grad_norm)
    batch_size = cfg.batch_size or math.ceil(cfg.actors / cfg.learners)
    if cfg.core != "none" and cfg.minibatches > batch_size * cfg.envs_per_actor:
        # a recurrent network's minibatches are whole sequences, one per env of the batch's segments
        raise ConfigError("minibatches", f"with --core {cfg.core} a minibatch is whole sequences, one per env: at most "
                                         f"{batch_size * cfg.envs_per_actor} (segments a batch x --envs-per-actor)")
    normalize = rl.normalization(env_spaces(rl.env)[0], cfg.gamma)
    twin = numpy_policy(net)  # the actors and the evaluator play it without torch, where the network has one
    # --core lstm: each env's core state, carried by its actor (or the inference server)
    state_shape = net.state_shape if isinstance(net, RecurrentActorCritic) else ()
    actor = functools.partial(SegmentActor, envs=rl.env_spec(cfg.envs_per_actor),
                              network_fn=shipped_network_fn(network_fn, twin),
                              unroll_length=cfg.unroll_length, refresh_every=1, gamma=cfg.gamma, seed=run.seed,
                              normalize=normalize, numpy_policy=twin, state_shape=state_shape,
                              # one learner, one update a push: its batch's pushes are the versions of a round
                              round_versions=cfg.epochs * cfg.minibatches if rounds else None)
    learner_gpus, server_gpus = rl.gpu_shares(run.runtime, cfg.learners, central)
    spec = run.server_spec(rule, cfg.optimizer, learning_rate(cfg, rl, rule), learners=cfg.learners)
    learner = learner_factory(functools.partial(PPOLearner, network_fn=network_fn, loss=loss, batch_size=batch_size,
                                                epochs=cfg.epochs, minibatches=cfg.minibatches, seed=run.seed,
                                                device=resolve_device(rl.device, runtime=run.runtime)),
                              run, spec, cfg.learners)
    queue = functools.partial(TrajectoryQueue, capacity=cfg.queue_capacity, max_policy_lag=cfg.max_policy_lag)
    # Central inference: the server pulls once per segment (2 x --unroll-length batches, the groups
    # alternating), as the actors of local inference do.
    inference = (sampled_inference(network_fn, rl, cfg.actors * cfg.envs_per_actor, 2 * cfg.unroll_length,
                                   run.seed, run.runtime, server_gpus, recurrent=bool(state_shape)),) if central else ()
    # On the local runtime the groups take turns in one process, so an actor's chunk of k segments
    # acts all k on the same parameters: every batch after a learner chunk's first would be whole
    # batches (epochs x minibatches versions) old, its ratios mostly clipped away. One segment per
    # chunk, never scaled up toward chunk_seconds, keeps each batch acted on the newest parameters.
    return rl_plan(
        run, rl, algo="ppo", net=net, network_fn=network_fn, policy_fn=policy_fn, eval_numpy=twin,
        eval_epsilon=cfg.EVAL_EPSILON, eval_every_s=cfg.EVAL_EVERY_S,
        central=central, config=asdict(cfg), spec=spec,
        groups=trajectory_groups(actor, learner, cfg.actors, cfg.learners, central, learner_gpus),
        services=(ServiceSpec(QUEUES, queue, cfg.learners), *inference),
        processes=cfg.actors + 2 * cfg.learners + len(inference),
        chunk_steps=lambda updates: 1 if in_turns else STEPS_PER_CHUNK,
        chunk_seconds=None if in_turns else CHUNK_SECONDS, metrics=METRICS, histograms=("learner.policy_lag",),
        normalized=("actor",) if normalize is not None else ())


def learning_rate(cfg: PPOConfig, rl: RLConfig, rule: UpdateRule) -> float | LinearDecay:
    """``--lr``, or with ``--lr-decay linear`` a rate falling to 0 over the server's updates of a
    ``--total-steps`` run: every batch of ``batch_size`` segments is ``--epochs`` x
    ``--minibatches`` pushes, and ``rule.aggregate`` pushes make one update (one optimizer step)."""
    if cfg.lr_decay == "none":
        return cfg.lr
    batch_steps = (cfg.batch_size or math.ceil(cfg.actors / cfg.learners)) * cfg.unroll_length * cfg.envs_per_actor
    pushes = math.ceil(rl.total_steps / batch_steps) * cfg.epochs * cfg.minibatches
    return LinearDecay(cfg.lr, max(1, math.ceil(pushes / rule.aggregate)))


def evaluation_policy(run: RunConfig, cfg: PPOConfig, rl: RLConfig) -> EvaluationPolicy:
    """``(network_fn, policy_fn)`` for evaluation and ``gorila eval``: the architecture and its greedy policy."""
    return evaluation_policy_for(rl.env, cfg, run.seed, "ppo")
