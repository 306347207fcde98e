"""A learner that owns its parameters hands its store its own array (``ParameterShard.publication``):
every way to a store on Ray takes what it keeps before ``publish`` returns, so the learner's next
step cannot reach the store through it."""

import numpy as np
import pytest

from gorila.params import ServerSpec, UpdateRule

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

SIZE = 40_000  # 160 KB of parameters: over Ray's 100 KB inline limit, so a Ray call puts them in its store


@pytest.mark.parametrize("path", ["fast", "ray"])
def test_the_store_holds_what_was_published_not_what_the_learner_did_next(ray_runtime, path):
    spec = ServerSpec(UpdateRule.asynchronous(), num_shards=1, optimizer="rmsprop", lr=1e-3)
    store = ray_runtime.start_shards(spec, np.zeros(SIZE, np.float32)).server.endpoints[0]
    learner = spec.build(np.ones(SIZE, np.float32))[0]
    publication = learner.publication(optimizer=False)
    pending = store.publish(publication) if path == "fast" else store.ray_publish(publication)
    publication["params"][:] = 7.0  # the learner's next step, before the store has answered
    pending.result(60.0)
    if path == "fast":
        assert store.transport == "shm"  # the same node's shared-memory slot took it, not a Ray call
    params, _ = store.pull().result(60.0)
    np.testing.assert_array_equal(params, 1.0)
