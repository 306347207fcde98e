"""The embedded Ray's processes run at the driver's scheduling priority, not Ray's default nice
15, under which every learner, shard and actor yields to any ordinary process on the machine; a
back-to-back evaluator runs below them."""

import os

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_the_embedded_rays_processes_run_at_the_drivers_priority(ray_local):
    from gorila.runtime.ray_runtime import RayRuntime

    runtime = RayRuntime(call_timeout_s=60)
    runtime.plan(1)
    try:
        services = runtime.start_services(lambda k: os, 1, name="priority")  # the process's own os module
        runtime.wait_started()
        (endpoint,) = services.endpoints()
        assert endpoint.call("nice", 0).result(timeout_s=30) == os.nice(0)  # nice(0) reads the niceness
    finally:
        runtime.shutdown()


@pytest.mark.parametrize("every_s, lowered", [(0.0, True), (1.0, False)])
def test_a_back_to_back_evaluator_plays_at_a_lower_priority_than_training(ray_local, every_s, lowered):
    """An evaluator with an evaluation always to play takes only the CPU training leaves; one
    evaluating on a cadence runs at the driver's priority, as the workers do."""
    import functools

    from gorila.driver.policy_evaluation import BACKGROUND_NICE, PolicyEvaluation
    from gorila.nets import FlatParams
    from gorila.nets.q import build_q_network, greedy_policy
    from gorila.params import ServerSpec, UpdateRule
    from gorila.runtime.ray_runtime import RayRuntime

    runtime = RayRuntime(call_timeout_s=60)
    runtime.plan(2)
    try:
        network_fn = functools.partial(build_q_network, "CartPole-v1", (8,), 0)
        shards = runtime.start_shards(ServerSpec(rule=UpdateRule.asynchronous()), FlatParams(network_fn()).get())
        evaluation = PolicyEvaluation("CartPole-v1", network_fn, greedy_policy, episodes=1, epsilon=0.0, seed=0,
                                      noop_max=0, every_s=every_s, target=None)
        evaluation.start(runtime, shards, {})
        evaluation.before_chunk({"env_steps": 0, "train_time_s": 0.0})
        score = evaluation.finish()
        expected = os.nice(0) + (BACKGROUND_NICE if lowered else 0)  # nice(0) reads the driver's niceness
        assert os.getpriority(os.PRIO_PROCESS, score.record["pid"]) == expected
    finally:
        runtime.shutdown()
