"""The inference server in this process, its clients over real shared memory and sockets:
actions go back to the env that asked, tagged with the version that chose them; a departed
client's waiting requests are dropped; a restarted server is found again."""

import functools

import numpy as np
import pytest

from gorila.actors.rollout import RolloutWorker
from gorila.envs.fake import CountingEnv
from gorila.envs.spec import EnvSpec
from gorila.inference.batching import BatchingRule
from gorila.inference.channel import InferenceChannel, SlotLayout
from gorila.inference.client import InferenceClient
from gorila.inference.server import InferenceServer
from gorila.runtime.local import LocalService

TIMEOUT_S = 10.0
LAYOUT = SlotLayout((1,), np.dtype(np.float32).str, (3, 2))


class FakeSource:
    """A ParamSource whose parameters are one number: its version."""

    def __init__(self):
        self.version = 0

    def pull(self):
        return np.array([self.version], np.float32)


class FakeServer:
    def __init__(self):
        self.source = FakeSource()

    def client(self, worker_id):
        return self.source


class OffsetPolicy:
    """action = observation + 1000 · (the loaded parameter): each action says which observation
    and which parameters chose it."""

    def __init__(self):
        self.param = None

    def load(self, params):
        self.param = float(params[0])

    def __call__(self, obs):
        return (obs[:, 0] + 1000 * self.param).astype(np.int64)


def start(params=None, max_batch=64, max_wait_s=0.0, refresh_every=1):
    params = params or FakeServer()
    server = InferenceServer(0, params, policy=OffsetPolicy, rule=BatchingRule(max_batch, max_wait_s),
                             refresh_every=refresh_every)
    return server, params


@pytest.fixture
def served():
    server, params = start()
    yield server, params
    server.close()


def obs(*values):
    return np.array(values, np.float32).reshape(-1, 1)


def test_actions_return_to_the_env_that_asked(served):
    server, _ = served
    channels = [InferenceChannel(server.address(), LAYOUT, TIMEOUT_S) for _ in range(3)]
    asked = {}
    for c, channel in enumerate(channels):
        for group, n in enumerate(LAYOUT.groups):
            asked[c, group] = 10 * c + group + 100 * np.arange(n)
            channel.send(group, obs(*asked[c, group]))
    for c, channel in reversed(list(enumerate(channels))):  # read in another order than asked
        for group in (1, 0):
            actions, version = channel.receive(group)
            assert actions.tolist() == asked[c, group].astype(np.int64).tolist()
            assert version == 0
    for channel in channels:
        channel.close()


def test_every_action_carries_the_version_of_the_parameters_that_chose_it(served):
    server, params = served
    channel = InferenceChannel(server.address(), LAYOUT, TIMEOUT_S)
    for version in (0, 3, 7):
        params.source.version = version  # the server pulls before every batch (refresh_every=1)
        channel.send(0, obs(1, 2, 3))
        actions, tagged = channel.receive(0)
        assert tagged == version
        assert actions.tolist() == [1 + 1000 * version, 2 + 1000 * version, 3 + 1000 * version]
    channel.close()


def test_parameters_are_refreshed_only_every_refresh_every_batches():
    server, params = start(refresh_every=3)
    try:
        channel = InferenceChannel(server.address(), LAYOUT, TIMEOUT_S)
        params.source.version = 5
        versions = []
        for _ in range(4):
            channel.send(1, obs(0, 0))
            versions.append(channel.receive(1)[1])
        assert versions == [0, 0, 0, 5]
        channel.close()
    finally:
        server.close()


def test_a_departed_clients_waiting_requests_are_dropped_and_the_others_served():
    # A batch needs 4 observations; no wait limit closes a smaller one in this test's time.
    server, _ = start(max_batch=4, max_wait_s=3600.0)
    try:
        dead = InferenceChannel(server.address(), SlotLayout((1,), "<f4", (2,)), TIMEOUT_S)
        dead.send(0, obs(-1, -2))       # half of a batch waits ...
        dead.close()                    # ... when its worker dies
        stats = server.wait_stats(lambda s: s["clients_lost"] == 1, TIMEOUT_S)
        assert stats["dropped"] == 2 and stats["batches"] == 0
        alive = [InferenceChannel(server.address(), SlotLayout((1,), "<f4", (2,)), TIMEOUT_S) for _ in range(2)]
        alive[0].send(0, obs(1, 2))
        alive[1].send(0, obs(3, 4))     # the restarted worker completes a batch with the live one
        assert alive[0].receive(0)[0].tolist() == [1, 2]
        assert alive[1].receive(0)[0].tolist() == [3, 4]
        assert server.stats()["batches"] == 1 and server.stats()["observations"] == 4
    finally:
        server.close()


class MovableEndpoint:
    """The service endpoint of whichever server is current (as Ray's name of a restarted one)."""

    def __init__(self, server):
        self.server = server

    def call(self, method, *args):
        return LocalService(self.server).call(method, *args)


def test_a_restarted_server_is_found_again_and_requests_in_flight_are_sent_again():
    first, params = start(max_batch=5, max_wait_s=3600.0)
    endpoint = MovableEndpoint(first)
    client = InferenceClient(endpoint, LAYOUT, TIMEOUT_S)
    client.request(0, obs(1, 2, 3))
    client.request(1, obs(4, 5))
    assert client.actions(0)[0].tolist() == [1, 2, 3]
    client.request(0, obs(6, 7, 8))     # 3 waiting of the 5 a batch needs: in flight when the server dies
    first.close()
    params.source.version = 2
    endpoint.server, _ = start(params, max_batch=3, max_wait_s=3600.0)
    try:
        # Group 1 was answered before the first server died; a reset connection may lose the
        # reply, and then the new server answers it again, with its own version.
        actions, version = client.actions(1)
        assert (actions.tolist(), version) in (([4, 5], 0), ([2004, 2005], 2))
        actions, version = client.actions(0)
        assert actions.tolist() == [2006, 2007, 2008] and version == 2
        assert client.reconnects == 1
    finally:
        client.close()
        endpoint.server.close()


def test_a_rollout_worker_steps_two_groups_in_turn_with_the_servers_actions():
    server, params = start()
    counting = functools.partial(CountingEnv, episode_length=1000)
    import gymnasium as gym

    gym.register("gorila-test/Counting-v0", entry_point=counting)
    try:
        rollout = RolloutWorker(EnvSpec("gorila-test/Counting-v0", 5, backend="gymnasium"),
                                LocalService(server), seed=0, timeout_s=TIMEOUT_S)
        params.source.version = 1
        seen = []
        for _ in range(4):
            t, group = rollout.step()
            seen.append((group, t.env_index.tolist()))
            # OffsetPolicy: the action is the env's own observation plus 1000 · version
            assert (t.action == t.obs[:, 0].astype(np.int64) + 1000 * t.policy_version).all()
        assert seen == [(0, [0, 1, 2]), (1, [3, 4])] * 2
        rollout.close()
    finally:
        gym.registry.pop("gorila-test/Counting-v0")
        server.close()


def test_the_server_counts_the_bytes_of_observations_read_and_actions_written(served):
    server, _ = served
    channel = InferenceChannel(server.address(), LAYOUT, TIMEOUT_S)
    sent = 0
    for group, n in enumerate(LAYOUT.groups):
        observations = obs(*range(n))
        channel.send(group, observations)
        sent += observations.nbytes
    received = sum(channel.receive(group)[0].nbytes for group in range(len(LAYOUT.groups)))
    stats = server.wait_stats(lambda s: s["observations"] == sum(LAYOUT.groups), TIMEOUT_S)
    assert stats["bytes_observations"] == sent and stats["bytes_actions"] == received
    channel.close()
