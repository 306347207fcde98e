"""``--device cuda`` on Ray: the learners and the inference server ask Ray for a share of a GPU and
land on the node that has one, in a two-node cluster on loopback whose second node declares a GPU.

What this checks, and what not: placement only. The declared GPU does not exist (Ray only counts
it), and nothing here can run CUDA. So each plan is built with cuda, as ``gorila train`` builds it
(its learners' factories carry the device), and its groups are started by the Ray runtime with the
plan's GPU shares, but each process builds a stand-in that reports the GPU ids Ray gave it instead
of the real worker, which would move its network to CUDA. No gradient step runs here."""

import sys

import pytest

from gorila.agents.apex.config import ApexConfig
from gorila.agents.dqn.config import DQNConfig
from gorila.agents.registry import ALGORITHMS
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig

# A cluster of its own and three placements: about a minute on two shared cores.
pytestmark = [pytest.mark.integration, pytest.mark.heavy, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def gpu_node():
    """A CPU-only head and a second node declaring one (fake) GPU; yields that node's id."""
    import ray
    from ray.cluster_utils import Cluster

    # CPUs as Ray counts them: room for every process of a plan, the learners' among them on the GPU node.
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 4, "num_gpus": 0, "include_dashboard": False})
    cluster.add_node(num_cpus=4, num_gpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the stand-in, built in Ray's processes
    yield next(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU", 0) > 0)
    ray.shutdown()
    cluster.shutdown()


class StandIn:
    """Built in place of a worker or a service (any factory's arguments): it only says which GPUs
    Ray assigned its process."""

    def __init__(self, *args, **kwargs):
        pass

    def gpu_ids(self):
        import ray

        return ray.get_gpu_ids()


def _place(plan):
    """The plan's groups and services started by the Ray runtime with their GPU shares and node
    pins, each process building a :class:`StandIn`; ``{name: (group, gpus)}`` and the runtime."""
    from gorila.runtime.ray_runtime import RayRuntime

    runtime = RayRuntime(schedule_timeout_s=60.0)
    runtime.plan(plan.processes + plan.spec.num_shards + 1)  # as the driver counts them
    shards = runtime.start_shards(plan.spec, plan.initial_params())
    placed = {s.name: (runtime.start_services(StandIn, s.count, name=s.name, node_of=s.node_of, gpus=s.gpus), s.gpus)
              for s in plan.services}
    for w in plan.groups({name: group.endpoints() for name, (group, _) in placed.items()}):
        placed[w.name] = (runtime.start_workers(StandIn, w.count, shards.server, name=w.name, node_of=w.node_of,
                                                gpus=w.gpus), w.gpus)
    return placed, runtime


def _plan(algo, cfg, rl):
    run = RunConfig(algo=algo, runtime="ray")
    return ALGORITHMS[algo].plan_fn()(run, cfg, rl)


def test_dqn_learners_on_cuda_share_a_gpu_and_land_on_the_node_that_has_it(gpu_node):
    plan = _plan("dqn", DQNConfig(replay="global", actors=2, learners=2, replay_shards=2),
                 RLConfig(env="CartPole-v1", device="cuda"))
    placed, runtime = _place(plan)
    try:
        learners, gpus = placed["learner"]
        assert gpus == 0.5  # two learners share the one GPU
        assert learners.node_ids == [gpu_node, gpu_node]
        assert learners.call("gpu_ids") == [[0], [0]]  # Ray gave each process the GPU (CUDA_VISIBLE_DEVICES)
        actors, actor_gpus = placed["actor"]
        assert actor_gpus == 0 and actors.call("gpu_ids") == [[], []]
        # What the real learners would have been built with: the device that asked for the GPU.
        spec = next(w for w in plan.groups({"replay": placed["replay"][0].endpoints()}) if w.name == "learner")
        assert spec.factory.keywords["learner"].keywords["device"] == "cuda"
    finally:
        runtime.shutdown()


def test_an_inference_server_on_cuda_lands_on_the_gpu_node_and_cpu_learners_ask_for_none(gpu_node):
    plan = _plan("apex", ApexConfig(actors=2, replay_shards=1),
                 RLConfig(env="CartPole-v1", device="cpu", inference="central", inference_device="cuda"))
    placed, runtime = _place(plan)
    try:
        server, gpus = placed["inference"]
        assert gpus == 1.0 and server.node_ids == [gpu_node] and server.call("gpu_ids") == [[0]]
        assert placed["learner"][1] == 0
    finally:
        runtime.shutdown()


def test_gpus_asked_beyond_the_cluster_fail_after_the_scheduling_timeout_naming_the_flag(gpu_node, gpu_refusal):
    assert "1 GPUs, not enough of them free" in str(gpu_refusal(StandIn, 1.0))
