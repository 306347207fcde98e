"""Pushes a shard must not take as they come: repeats, pushes from before a restart, streaks of
non-finite gradients, wrong shapes. In-process shards and clients, no Ray."""

import numpy as np
import pytest

from gorila.checkpoint import save_checkpoint
from gorila.errors import GradientError, NonFiniteError
from gorila.params import LocalEndpoint, ParameterClient, ParameterShard, PushTag, ServerSpec, UpdateRule, shard_state
from gorila.runtime.shard_recovery import ShardRecovery

N = 6


def shard(rule=None, **kw):
    return ParameterShard(np.zeros(N, np.float32), rule or UpdateRule.asynchronous(), "adam", lr=0.1, **kw)


def ones(value=1.0):
    return np.full(N, value, np.float32)


class RedeliveringEndpoint(LocalEndpoint):
    """An in-process shard reached by a transport that delivers every push twice, as a retried
    call whose first reply was lost does."""

    def push(self, grad, version, worker_id, tag=None):
        super().push(grad, version, worker_id, tag)
        return super().push(grad, version, worker_id, tag)


def test_row8_a_redelivered_push_is_applied_once():
    """Row 8 (duplicate push): a push carrying (client, sequence) already seen is dropped."""
    s = shard()
    first = s.push(ones(), 0, tag=PushTag(client=7, seq=0))
    after_first = s.state_dict()
    again = s.push(ones(), 0, tag=PushTag(client=7, seq=0))
    assert first.applied and not again.applied
    assert (again.outcome, again.reason) == ("rejected", "duplicate")
    assert again.params is not None and again.version == 1  # the pusher learns where the shard is
    for key, value in s.state_dict().items():
        if key != "stats":  # counters of the duplicate itself
            assert value.tobytes() == after_first[key].tobytes(), key
    assert s.stats.pushes_rejected_duplicate == 1
    # Another client's push numbered 0 is not a repeat; nor is this client's next one.
    assert s.push(ones(), 1, tag=PushTag(client=8, seq=0)).applied
    assert s.push(ones(), 2, tag=PushTag(client=7, seq=1)).applied


def test_row8_a_client_over_a_redelivering_transport_moves_the_shard_once_per_push():
    """Row 8 end to end in one process: every push arrives twice, every gradient is applied once."""
    s = shard()
    client = ParameterClient([RedeliveringEndpoint(s)], ServerSpec(UpdateRule.asynchronous()).layout(N))
    for _ in range(5):
        client.params()
        client.push(ones())
    assert s.version == 5 and s.stats.pushes_rejected_duplicate == 5
    # A restarted worker is a new client: its numbering starts again and is not taken for repeats.
    fresh = ParameterClient([LocalEndpoint(s)], ServerSpec(UpdateRule.asynchronous()).layout(N))
    fresh.params()
    assert fresh.push(ones()).applied and s.version == 6


def test_row6_the_mth_nonfinite_push_in_a_row_stops_the_worker_with_a_clear_error():
    """Row 6 (non-finite gradient): each one is rejected with nothing changed; M in a row from one
    worker raise NonFiniteError naming the worker; a finite push in between starts the count again."""
    s = shard(nonfinite_limit=3)
    s.push(ones(), 0, worker_id=1)
    before = s.state_dict()
    bad = ones(np.nan)
    for _ in range(2):
        result = s.push(bad, s.version, worker_id=1)
        assert (result.outcome, result.reason, result.applied) == ("rejected", "nonfinite", False)
        s.push(bad, s.version, worker_id=2)  # another worker's streak is its own
    assert s.push(ones(), s.version, worker_id=1).applied  # breaks worker 1's streak
    before = s.state_dict()
    for _ in range(2):
        s.push(bad, s.version, worker_id=1)
    with pytest.raises(NonFiniteError, match="worker 1 pushed 3 non-finite gradients in a row"):
        s.push(ones(np.inf), s.version, worker_id=1)
    after = s.state_dict()
    for key in ("params", "pending", "counters", "optim.m", "optim.v"):
        assert after[key].tobytes() == before[key].tobytes(), key  # optimizer state untouched
    with pytest.raises(NonFiniteError, match="worker 2"):
        s.push(bad, s.version, worker_id=2)  # its third in a row


def test_row7_wrong_shape_or_dtype_names_both_and_the_shard_keeps_serving():
    """Row 7 (wrong shape / dtype): a typed error naming expected and received; others still served."""
    s = shard()
    with pytest.raises(GradientError, match=r"expected float32 of shape \(6,\), got float64 of shape \(6,\)"):
        s.push(np.ones(N), 0)
    with pytest.raises(GradientError, match=r"expected float32 of shape \(6,\), got float32 of shape \(5,\)"):
        s.push(np.ones(N - 1, np.float32), 0)
    assert s.version == 0 and s.push(ones(), 0, worker_id=3).applied


def test_row3_clients_see_the_version_go_back_and_compute_on_the_restored_parameters(tmp_path):
    """Row 3 (parameter shard killed), the protocol: a shard restored from a checkpoint refuses
    pushes computed before its restart, pipelined ones included, and sends the restored
    parameters; the client's version goes back and its next push is applied."""
    rule = UpdateRule.asynchronous()
    recovery = ShardRecovery(tmp_path, shard_id=0, rule=rule, optimizer="adam")
    live = ParameterShard(np.zeros(N, np.float32), rule, "adam", lr=0.1)
    recovery.save_start(live)
    endpoint = LocalEndpoint(live)
    client = ParameterClient([endpoint], ServerSpec(rule).layout(N))
    for _ in range(3):
        client.params()
        client.push(ones())
    save_checkpoint(tmp_path, shard_state([live.state_dict()]), {"updates": live.version})
    saved = live.state_dict()
    for _ in range(2):
        client.params()
        client.push(ones(2.0))
    client.params()
    assert client.versions == [5]

    endpoint.shard, source = recovery.restore()  # the process died and came back
    assert "3 updates" in source and endpoint.shard.epoch != 0
    restored = endpoint.shard.state_dict()
    for key in ("params", "counters", "optim.m", "optim.v", "optim.steps"):
        assert restored[key].tobytes() == saved[key].tobytes(), key

    # Two gradients computed on version 5 of the shard's earlier life; the second is pipelined
    # behind the first, so it is sent before the first one's reply brings the restored parameters.
    client.push(ones(3.0), wait=False)
    refused = client.push(ones(4.0))
    assert refused.outcomes == ("rejected",) and client.rejections["restarted"] == 2
    assert client.versions == [3]  # went back
    np.testing.assert_array_equal(client.params(), saved["params"])
    assert endpoint.shard.version == 3  # neither push was applied
    assert client.push(ones()).applied and client.versions == [4]


def test_row3_a_restart_before_any_run_checkpoint_restores_the_start_with_its_learning_rates(tmp_path):
    """Row 3: with no run checkpoint yet, a restarted shard comes back as it started, per-parameter
    learning rates included."""
    rule = UpdateRule.asynchronous()
    lr = np.linspace(0.1, 0.6, N).astype(np.float32)
    start = ParameterShard(np.arange(N, dtype=np.float32), rule, "sgd", lr=lr)
    recovery = ShardRecovery(tmp_path, shard_id=0, rule=rule, optimizer="sgd")
    recovery.save_start(start)
    back, source = recovery.restore()
    assert "start" in source and back.version == 0
    back.push(ones(), 0, tag=PushTag(epoch=back.epoch))
    np.testing.assert_allclose(back.pull()[0], np.arange(N) - lr)
