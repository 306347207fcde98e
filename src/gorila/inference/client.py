"""A rollout worker's side of the run's inference server: requests that survive a server restart."""

from __future__ import annotations

import time

import numpy as np

from gorila.errors import WorkerTimeoutError
from gorila.inference.channel import ChannelLost, InferenceChannel, SlotLayout
from gorila.reply import ServiceEndpoint

_RETRY_S = 0.05


class InferenceClient:
    """Asks the inference server for each group's actions; a lost server is found again::

        client = InferenceClient(endpoint, SlotLayout((4,), "float32", (4, 4)), timeout_s=30)
        client.request(0, obs0); client.request(1, obs1)      # both groups in flight
        actions, version = client.actions(0)                  # group 0's answer
        actions, log_probs, version = client.sampled(1)       # ... with each action's log pi(a|x)
        client.request(0, obs0, starts0)                      # a recurrent policy's: episodes begun
        client.core_state(0)                                  # the states its last answer came from

    The server's socket path comes from one call to its endpoint (a Ray call on the Ray runtime),
    made when connecting and again after the connection is lost: a restarted server listens on a
    new path, and the requests that were in flight are sent to it again.
    """

    def __init__(self, endpoint: ServiceEndpoint, layout: SlotLayout, timeout_s: float):
        self.endpoint, self.layout, self.timeout_s = endpoint, layout, timeout_s
        self.channel: InferenceChannel | None = None
        # group -> the observations it asked about (and where they begin episodes)
        self.in_flight: dict[int, tuple[np.ndarray, np.ndarray | None]] = {}
        self.reconnects = 0

    def request(self, group: int, obs: np.ndarray, starts: np.ndarray | None = None) -> None:
        self.in_flight[group] = (obs, starts)
        try:
            self._channel().send(group, obs, starts)
        except ChannelLost:
            self._reconnect()

    def core_state(self, group: int) -> np.ndarray:
        """A recurrent policy's: a copy of the core states the server carried into ``group``'s last
        answered step (read before the group's next request). A restarted server starts its envs'
        states again from zero."""
        if self.channel is None:
            raise RuntimeError("core_state is read after an answer")
        return self.channel.slots.core_state[group].copy()

    def actions(self, group: int) -> tuple[np.ndarray, int]:
        """Group ``group``'s actions and the ``policy_version`` that chose them."""
        actions, _, version = self.sampled(group)
        return actions, version

    def sampled(self, group: int) -> tuple[np.ndarray, np.ndarray, int]:
        """Group ``group``'s actions, their log-probabilities under the policy that chose them (0 for
        a deterministic one), and its ``policy_version``."""
        while True:
            try:
                reply = self._channel().receive_sampled(group)
            except ChannelLost:
                self._reconnect()
                continue
            del self.in_flight[group]
            return reply

    def _channel(self) -> InferenceChannel:
        """The open channel, or a new one. A path that refuses connections belongs to a server that
        has just died: its endpoint is asked again (on Ray, the call waits for the restart)."""
        deadline = time.monotonic() + self.timeout_s
        while self.channel is None or self.channel.closed:
            path = self.endpoint.call("address").result(self.timeout_s)
            try:
                self.channel = InferenceChannel(path, self.layout, self.timeout_s)
            except ChannelLost:
                if time.monotonic() > deadline:
                    raise WorkerTimeoutError(f"no inference server answered at {path} within {self.timeout_s:g} s "
                                             "(rollout workers must share its node)") from None
                time.sleep(_RETRY_S)  # the endpoint still names the dead server: give the restart time
        return self.channel

    def _reconnect(self) -> None:
        """A new channel (to the server, restarted or not), with every request in flight sent again."""
        self.reconnects += 1
        if self.channel is not None:
            self.channel.close()
        self.channel = None
        for group, (obs, starts) in self.in_flight.items():
            self._channel().send(group, obs, starts)

    def close(self) -> None:
        if self.channel is not None:
            self.channel.close()
