"""IMPALA with ``--inference central`` on Pendulum-v1 on real Ray: the inference server and the
rollout workers in processes of their own, and the segments that reach the trajectory queues still
carry each unclipped Gaussian sample with its exact log-probability."""

import pytest

from tests.component.test_continuous_control import (
    assert_unclipped_samples_with_exact_log_probs,
    central_impala_on_pendulum,
    segments_taken,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


@pytest.mark.heavy
def test_impala_central_on_pendulum_on_ray_stores_unclipped_samples_with_exact_log_probs(ray_local, tmp_path, train):
    on_chunk, taken = segments_taken(wanted=4)
    summary = train(*central_impala_on_pendulum("ray", tmp_path), on_chunk=on_chunk)
    assert summary["stop_reason"] == "on_chunk" and summary["worker_restarts"] == 0
    # No claim on the learner's updates: the test takes the queues' segments after every chunk, so
    # whether the learner got one first is a race (it lost it once, 0 updates, on a quiet machine).
    assert summary["inference_mean_batch"] >= 1
    assert len(taken) >= 4
    assert_unclipped_samples_with_exact_log_probs(taken, seed=4)
