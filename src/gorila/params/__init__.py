"""The sharded parameter server: update rule, shards, optimizers, and the worker-side client.

::

    from gorila.params import ParameterShard, UpdateRule
    shard = ParameterShard(np.zeros(d, np.float32), rule=UpdateRule.semi_async(), optimizer="sgd", lr=0.1)
    result = shard.push(grad, version=x, worker_id=k)
    params, version = shard.pull()
"""

from gorila.params.client import ClientPush, LocalEndpoint, ParameterClient, ShardEndpoint
from gorila.params.layout import ShardLayout
from gorila.params.optim import OPTIMIZERS, make_optimizer
from gorila.params.rule import OUTCOMES, UpdateRule
from gorila.params.server import ParameterServer, ServerSpec, merge_stats, shard_state, split_shard_state
from gorila.params.shard import ParameterShard, PushResult, PushTag
from gorila.params.shard_stats import ShardStats

__all__ = [
    "OPTIMIZERS", "OUTCOMES", "ClientPush", "LocalEndpoint", "ParameterClient", "ParameterServer",
    "ParameterShard", "PushResult", "PushTag", "ServerSpec", "ShardEndpoint", "ShardLayout", "ShardStats", "UpdateRule",
    "make_optimizer", "merge_stats", "shard_state", "split_shard_state",
]
