"""The builder kit: what the RL builders share is filled one way, from explicit arguments."""

import functools
import pickle

import pytest

from gorila.agents.a3c.builder import evaluation_policy as a3c_policy
from gorila.agents.a3c.config import A3CConfig
from gorila.agents.apex.builder import make_plan as apex_plan
from gorila.agents.apex.config import ApexConfig
from gorila.agents.dqn.builder import make_plan as dqn_plan
from gorila.agents.dqn.config import DQNConfig
from gorila.agents.kit import ACTOR_NICE, INFERENCE, INFERENCE_METRICS, QUEUES
from gorila.agents.registry import ALGORITHMS
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig
from gorila.driver.policy_evaluation import PolicyEvaluation
from gorila.errors import ConfigError
from gorila.reply import ServiceEndpoint
from role_fakes import EndpointStandIn


def test_evaluation_epsilon_is_the_algorithms_unless_given():
    dqn = dqn_plan(RunConfig(algo="dqn"), DQNConfig(), RLConfig())
    assert isinstance(dqn.evaluation, PolicyEvaluation)
    assert dqn.config["eval_epsilon"] == 0.05 and dqn.evaluation.epsilon == 0.05
    given = dqn_plan(RunConfig(algo="dqn"), DQNConfig(), RLConfig(eval_epsilon=0.0))
    assert isinstance(given.evaluation, PolicyEvaluation)
    assert given.config["eval_epsilon"] == 0.0 and given.evaluation.epsilon == 0.0


@pytest.mark.parametrize("algo, runtime, given, every_s", [
    ("a3c", "ray", None, 0.0), ("impala", "ray", None, 0.0), ("ppo", "ray", None, 0.0),  # back to back
    ("a3c", "local", None, 1.0),  # where an evaluation takes the training's own time
    ("dqn", "ray", None, 1.0), ("apex", "ray", None, 1.0),
    ("a3c", "ray", 2.5, 2.5), ("dqn", "local", 0.0, 0.0)])  # --eval-every-s wins
def test_the_evaluation_cadence_is_the_algorithms_on_ray_unless_given(algo, runtime, given, every_s):
    entry = ALGORITHMS[algo]
    configs = [cls() for cls in entry.config_classes()]
    configs = [RLConfig(eval_every_s=given) if isinstance(c, RLConfig) else c for c in configs]
    plan = entry.plan_fn()(RunConfig(algo=algo, runtime=runtime), *configs)
    assert isinstance(plan.evaluation, PolicyEvaluation)
    assert plan.evaluation.every_s == every_s and plan.config["eval_every_s"] == every_s


def test_the_config_record_holds_the_algorithms_and_the_rl_settings_and_the_inference_chosen():
    plan = apex_plan(RunConfig(algo="apex"), ApexConfig(actors=2), RLConfig(total_steps=1234, inference="central"))
    assert plan.config["actors"] == 2 and plan.config["total_steps"] == 1234
    assert plan.config["inference"] == "central" and plan.budget.total == 1234
    assert plan.metrics[-len(INFERENCE_METRICS):] == INFERENCE_METRICS
    assert [s.name for s in plan.services] == ["replay", INFERENCE]
    local = apex_plan(RunConfig(algo="apex"), ApexConfig(actors=2), RLConfig(inference="local"))
    assert local.config["inference"] == "local" and not set(INFERENCE_METRICS) & set(local.metrics)


@pytest.mark.parametrize("replay, processes", [("local", 3), ("global", 3 + 1 + 2)])
def test_dqn_counts_its_processes_in_either_topology(replay, processes):
    cfg = DQNConfig(actors=3, replay=replay, replay_shards=2 if replay == "global" else 1)
    assert dqn_plan(RunConfig(algo="dqn"), cfg, RLConfig()).processes == processes


def test_the_a3c_network_function_carries_only_what_shapes_the_network():
    """Workers receive the network function: it binds the env, the widths, the torso and the seed,
    not the whole config (which would ship every setting to every worker)."""
    network_fn, _ = a3c_policy(RunConfig(algo="a3c", seed=4), A3CConfig(hidden=(16,), shared_torso=True),
                               RLConfig())
    assert isinstance(network_fn, functools.partial) and network_fn.args == ("CartPole-v1", (16,), True, 4)
    assert b"A3CConfig" not in pickle.dumps(network_fn)


def test_on_ray_the_processes_on_cuda_share_one_gpu_and_the_others_ask_for_none():
    ray = RunConfig(algo="dqn", runtime="ray")
    cuda = RLConfig(device="cuda", inference="central", inference_device="cuda")
    plan = dqn_plan(ray, DQNConfig(replay="global", actors=2, learners=2), cuda)
    groups = {w.name: w for w in plan.groups({"replay": [EndpointStandIn()], INFERENCE: [EndpointStandIn()]})}
    services = {s.name: s for s in plan.services}
    # two learners and the inference server on one GPU, a third each (to Ray's 1/10,000)
    assert groups["learner"].gpus == services[INFERENCE].gpus == 0.3333
    assert groups["actor"].gpus == 0 and services["replay"].gpus == 0
    bundles = dqn_plan(ray, DQNConfig(actors=4), RLConfig(device="cuda")).groups({})
    assert [(w.name, w.gpus) for w in bundles] == [("bundle", 0.25)]  # each bundle holds a learner


@pytest.mark.parametrize("algo", ["impala", "ppo"])
def test_queue_fed_learners_on_cuda_ask_for_a_gpu_share_and_are_built_on_cuda(algo):
    ray = RunConfig(algo=algo, runtime="ray", mode="async")
    config = ALGORITHMS[algo].config_classes()[0](learners=2)
    plan = ALGORITHMS[algo].plan_fn()(ray, config, RLConfig(device="cuda", inference="central",
                                                             inference_device="cuda"))
    groups = {w.name: w for w in plan.groups({QUEUES: [EndpointStandIn(), EndpointStandIn()],
                                              INFERENCE: [EndpointStandIn()]})}
    services = {s.name: s for s in plan.services}
    assert groups["learner"].gpus == services[INFERENCE].gpus == 0.3333 and groups["actor"].gpus == 0
    factory = groups["learner"].factory
    assert isinstance(factory, functools.partial) and factory.keywords["device"] == "cuda"


def test_device_cpu_asks_for_no_gpu_and_cuda_without_a_gpu_is_refused_off_ray():
    import torch

    cpu = RLConfig(device="cpu", inference_device="cpu")  # auto would pick a GPU where this machine has one
    plan = apex_plan(RunConfig(algo="apex", runtime="ray"), ApexConfig(), cpu)
    groups = plan.groups({"replay": [EndpointStandIn()]})
    assert all(w.gpus == 0 for w in groups) and all(s.gpus == 0 for s in plan.services)
    assert cpu.gpu_shares("ray", learners=2, central=True) == (0.0, 0.0)
    if not torch.cuda.is_available():  # auto stays on the CPU where this machine has no GPU, on either runtime
        assert RLConfig().gpu_shares("ray", learners=2, central=True) == (0.0, 0.0)
        with pytest.raises(ConfigError) as err:
            dqn_plan(RunConfig(algo="dqn", runtime="local"), DQNConfig(), RLConfig(device="cuda"))
        assert err.value.field == "device"


@pytest.mark.parametrize("algo", ["impala", "ppo", "apex"])
def test_the_actors_that_feed_a_learner_yield_the_cpu_to_it(algo):
    entry = ALGORITHMS[algo]
    plan = entry.plan_fn()(RunConfig(algo=algo, runtime="ray"), *[cls() for cls in entry.config_classes()])
    services: dict[str, list[ServiceEndpoint]] = {s.name: [EndpointStandIn()] * s.count for s in plan.services}
    nice = {group.name: group.nice for group in plan.groups(services)}
    assert nice == {"actor": ACTOR_NICE, "learner": 0} and ACTOR_NICE > 0
