"""What the RL algorithms (``dqn``, ``apex``, ``a3c``, ``impala``, ``ppo``) share: the environment, the step
budget, evaluation, devices, and how actors choose their actions (``--inference``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import gymnasium as gym

from gorila import validate
from gorila.envs.normalize import Normalization
from gorila.envs.spec import EnvSpec
from gorila.envs.vector import BACKENDS
from gorila.errors import ConfigError
from gorila.inference.batching import BatchingRule
from gorila.params.cache import PARAM_CACHE_MODES
from gorila.params.tiers import CACHE_TIERS, CacheTiers

DEVICES = ("auto", "cpu", "cuda")
DEVICE_COPIES = ("async", "sync")
INFERENCE_MODES = ("auto", "local", "central")
TARGET_ON = ("eval", "train100")
#: The algorithms that normalise observations and rewards (``--normalize-obs``, ``--normalize-reward``).
NORMALIZING_ALGOS = ("a3c", "impala", "ppo")


#: Evaluation cadences, seconds from one evaluation's start to the next's (``--eval-every-s``
#: overrides them). One a second is the default, and the local runtime's always: there an evaluation
#: takes the training's own time. The actor-critics (a3c, impala, ppo) evaluate back to back on Ray
#: (:data:`~gorila.driver.policy_evaluation.BACK_TO_BACK`): their greedy return swings from one
#: version to the next (CartPole: 468, 332, 108, 430, 500 a second apart), and a judgement a second
#: misses most of the versions that reach the target.
ONE_A_SECOND = 1.0

@dataclass(frozen=True)
class RLConfig:
    """The environment, when to stop, how to evaluate::

        rl = RLConfig(env="CartPole-v1", total_steps=200_000, eval_episodes=10)
        rl.target()   # 475.0, the env's reward threshold
    """

    env: str = field(default="CartPole-v1", metadata={"help": "Gymnasium env id (ALE/<Game>-v5 for Atari)"})
    env_backend: str = field(default="auto", metadata={
        "help": "what steps the actors' envs: envpool (EnvPool's threads, gorila[envpool]), gymnasium, or auto: "
                "EnvPool for ALE/<Game>-v5 ids where it is installed, Gymnasium otherwise (evaluation always plays "
                "Gymnasium's)", "choices": BACKENDS})
    terminal_on_life_loss: bool = field(default=False, metadata={
        "help": "Atari, training only: a lost life ends the episode (EnvPool goes on with the next life, "
                "Gymnasium restarts the game)"})
    total_steps: int = field(default=1_000_000, metadata={
        "help": "stop after this many env steps (MinAtar ids: 5,000,000 unless given, Young & Tian's published "
                "budget; a preset may set its own)"})
    target_return: float | None = field(default=None, metadata={
        "help": "the return that counts as solved, judged as --target-on says (default: the env's reward threshold)"})
    target_on: str = field(default="eval", metadata={
        "help": "eval: the greedy evaluation's mean return; train100: the mean training return of the run's latest "
                "100 episodes (as published learning curves report)", "choices": TARGET_ON})
    stop_at_target: bool = field(default=True, metadata={"help": "stop once the target is reached"})
    eval_episodes: int = field(default=10, metadata={"help": "episodes per evaluation"})
    eval_epsilon: float | None = field(default=None, metadata={
        "help": "exploration rate during evaluation (the DQN papers evaluate with 0.05; policy-gradient methods "
                "greedily)"})
    eval_noop_max: int = field(default=30, metadata={"help": "evaluation episodes start after 0..N no-op actions"})
    eval_every_s: float | None = field(default=None, metadata={
        "help": "at most one evaluation per this many seconds (default: 1; on Ray 0, back to back, for a3c, impala and "
                "ppo, whose evaluator then plays in its own process without pause)"})
    eval_every_steps: int | None = field(default=None, metadata={
        "help": "evaluate every this many env steps instead of by the clock, so that where a run is judged does not "
                "depend on the machine's speed; on --runtime local each evaluation is then played whole where it "
                "falls due, rather than in slices of the time between chunks, so that a seed's rows are the same in "
                "every run (default: by --eval-every-s)", "metavar": "STEPS"})
    device: str = field(default="auto", metadata={"help": "learner device", "choices": DEVICES})
    device_copy: str = field(default="async", metadata={
        "help": "a DQN / Ape-X learner on cuda: async copies the next minibatch into pinned host memory and onto "
                "the GPU on a side stream while this one trains; sync copies each one when the loss reads it",
        "choices": DEVICE_COPIES})
    inference: str = field(default="auto", metadata={
        "help": "local: every actor acts with its own network copy; central: actors only step envs and the "
                "run's inference server batches their observations; auto: central for image observations "
                "when the server has a GPU, else local", "choices": INFERENCE_MODES})
    inference_batch: int | None = field(default=None, metadata={
        "help": "central inference: a batch closes once this many observations wait (default: half of all "
                "actors' envs, one group of each)"})
    inference_wait_ms: float = field(default=2.0, metadata={
        "help": "central inference: ... or once the oldest has waited this long"})
    inference_device: str = field(default="auto", metadata={"help": "central inference: the server's device",
                                                            "choices": DEVICES})
    param_cache: str = field(default="none", metadata={
        "help": "node: a parameter cache on every node that long-polls the shards for each new version, pulls "
                "it once and serves that node's actors from shared memory (Menger; dqn: --replay global only); "
                "none: every actor pulls from the server", "choices": PARAM_CACHE_MODES})
    cache_tiers: str = field(default="node", metadata={
        "help": "--param-cache node: node (each node's cache reads the server) or node,rack (each node's cache "
                "reads its rack's cache, which reads the server: one server read per version per rack)",
        "choices": CACHE_TIERS})
    nodes_per_rack: int | None = field(default=None, metadata={
        "help": "--cache-tiers node,rack: nodes per rack (rack r holds nodes rK .. rK+K-1, in Ray's order of "
                "the alive nodes; its cache runs on the first)", "metavar": "K"})
    normalize_obs: bool = field(default=False, metadata={
        "help": "a3c, impala, ppo with vector observations: actors normalise each observation by the run's running "
                "mean and variance, (obs - mean) / sqrt(var + 1e-8) clipped to +-10, and store it so; the "
                "statistics are merged across actors, saved in checkpoints and frozen at evaluation"})
    normalize_reward: bool = field(default=False, metadata={
        "help": "a3c, impala, ppo: actors divide each reward by the running standard deviation of the discounted "
                "return (gamma), clipped to +-10; reported returns stay the raw rewards'"})

    def __post_init__(self) -> None:
        if not isinstance(self.env, str) or not self.env:
            raise ConfigError("env", f"must be a Gymnasium id, got {self.env!r}")
        validate.choice("env_backend", self.env_backend, BACKENDS)
        validate.boolean("terminal_on_life_loss", self.terminal_on_life_loss)
        validate.integer("total_steps", self.total_steps, low=1)
        if self.target_return is not None:
            validate.number("target_return", self.target_return)
        validate.choice("target_on", self.target_on, TARGET_ON)
        validate.integer("eval_episodes", self.eval_episodes, low=1)
        if self.eval_epsilon is not None:
            validate.number("eval_epsilon", self.eval_epsilon, low=0.0, high=1.0)
        validate.integer("eval_noop_max", self.eval_noop_max, low=0)
        if self.eval_every_s is not None:
            validate.number("eval_every_s", self.eval_every_s, low=0.0)
        if self.eval_every_steps is not None:
            validate.integer("eval_every_steps", self.eval_every_steps, low=1)
        validate.choice("device", self.device, DEVICES)
        validate.choice("device_copy", self.device_copy, DEVICE_COPIES)
        validate.choice("inference", self.inference, INFERENCE_MODES)
        if self.inference_batch is not None:
            validate.integer("inference_batch", self.inference_batch, low=1)
        validate.number("inference_wait_ms", self.inference_wait_ms, low=0.0)
        validate.choice("inference_device", self.inference_device, DEVICES)
        validate.choice("param_cache", self.param_cache, PARAM_CACHE_MODES)
        CacheTiers.parse(self.cache_tiers, self.nodes_per_rack)
        if self.param_cache == "none" and self.cache_tiers != "node":
            raise ConfigError("cache_tiers", f"{self.cache_tiers} chains the parameter caches of --param-cache node; "
                                             "add it, or leave --cache-tiers out")

    def env_spec(self, num_envs: int) -> EnvSpec:
        """The envs an actor steps, ``num_envs`` of them, on ``--env-backend``."""
        return EnvSpec(self.env, num_envs, self.env_backend, self.terminal_on_life_loss)

    def check_algorithm(self, algo: str) -> None:
        """Refuse normalisation for an algorithm that does not do it (dqn, apex)."""
        for name in ("normalize_obs", "normalize_reward"):
            if getattr(self, name) and algo not in NORMALIZING_ALGOS:
                raise ConfigError(name, f"{algo} does not normalise; {', '.join(NORMALIZING_ALGOS)} do")

    def normalization(self, observation_space: gym.Space, gamma: float) -> Normalization | None:
        """What the actors normalise (None: nothing), the return discounted by ``gamma``;
        ``--normalize-obs`` is refused for observations that are not vectors (frames, grids)."""
        if self.normalize_obs and not (isinstance(observation_space, gym.spaces.Box)
                                       and len(observation_space.shape) == 1):
            raise ConfigError("normalize_obs", f"{self.env}'s observations are {observation_space}: only vector "
                                               "observations (a 1-D Box) are normalised; leave it out")
        if not (self.normalize_obs or self.normalize_reward):
            return None
        return Normalization(obs=self.normalize_obs, reward=self.normalize_reward, gamma=gamma)

    def cache_tiers_plan(self) -> CacheTiers | None:
        """The caches a plan places (``Plan.param_cache``): None without ``--param-cache node``."""
        return None if self.param_cache == "none" else CacheTiers.parse(self.cache_tiers, self.nodes_per_rack)

    def central_inference(self, observation_space: gym.Space, gpu: bool | None = None, runtime: str = "local") -> bool:
        """Whether actors ask an inference server (``--inference``). ``auto`` chooses central for image
        observations when the server has a GPU (``--inference-device``; ``gpu`` overrides what torch
        sees): on CPU cores every actor's own Nature CNN sampled faster than one server (``gorila bench
        sampling``), and an MLP's forward pass costs less than the round trip to a server."""
        if self.inference == "auto":
            if gpu is None:
                gpu = self.server_device(runtime) == "cuda"
            return gpu and len(observation_space.shape or ()) == 3
        return self.inference == "central"

    def server_device(self, runtime: str = "local") -> str:
        """The inference server's device: ``--inference-device`` resolved (``auto``: a GPU if torch sees one)."""
        return resolve_device(self.inference_device, "inference_device", runtime)

    def gpu_shares(self, runtime: str, learners: int, central: bool) -> tuple[float, float]:
        """The share of a GPU that each of ``learners`` learner processes (on ``--device``; 0 for
        an algorithm whose learners never leave the CPU) and the inference server (``central``, on
        ``--inference-device``) ask the runtime for: the processes on cuda share one GPU equally
        (Ray's ``num_gpus``, rounded down to its 1/10,000), so that a cluster places them on a node
        with a GPU::

            rl = RLConfig(device="cuda")
            rl.gpu_shares("ray", learners=2, central=False)   # (0.5, 0.0)
        """
        learner = learners > 0 and resolve_device(self.device, "device", runtime) == "cuda"
        server = central and self.server_device(runtime) == "cuda"
        on_gpu = (learners if learner else 0) + (1 if server else 0)
        share = math.floor(10_000 / on_gpu) / 10_000 if on_gpu else 0.0
        return (share if learner else 0.0, share if server else 0.0)

    def batching_rule(self, total_envs: int) -> BatchingRule:
        """The inference server's rule; by default a batch is one group (half the envs) of every actor."""
        batch = self.inference_batch if self.inference_batch is not None else max(1, total_envs // 2)
        return BatchingRule.from_flags(batch, self.inference_wait_ms)

    def target(self) -> float | None:
        """``target_return``, or the env's registered reward threshold (None if it has none)."""
        if self.target_return is not None:
            return self.target_return
        try:
            return gym.spec(self.env).reward_threshold
        except gym.error.Error:
            return None


def resolve_device(device: str, field: str = "device", runtime: str = "local") -> str:
    """``auto`` is ``cuda`` when a GPU is visible here, else ``cpu`` (so a machine without one, and
    its embedded Ray, stays on the CPU). ``cuda`` without one is an error naming ``field``
    (``device``, ``inference_device``), except on the Ray ``runtime``: there the processes on cuda
    ask Ray for a GPU, which places them on a node that has one (this one need not) or, where no
    node has one, fails after its scheduling timeout naming the flag."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and runtime != "ray" and not torch.cuda.is_available():
        raise ConfigError(field, "cuda was asked for but torch sees no GPU")
    return device
