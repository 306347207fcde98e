"""The sharded parameter server: update rule, shards, optimizers, and the worker-side client.

::

    from gorila.params import ParameterShard, UpdateRule
    shard = ParameterShard(np.zeros(d, np.float32), rule=UpdateRule.semi_async(), optimizer="sgd", lr=0.1)
    result = shard.push(grad, version=x, worker_id=k)
    params, version = shard.pull()
"""

from gorila.params.client import ClientPush, Done, LocalEndpoint, ParameterClient, Pending, ShardEndpoint
from gorila.params.layout import ShardLayout
from gorila.params.optim import OPTIMIZERS, make_optimizer
from gorila.params.rule import OUTCOMES, UpdateRule
from gorila.params.server import ServerSpec, merge_stats
from gorila.params.shard import ParameterShard, PushResult, ShardStats

__all__ = [
    "OPTIMIZERS", "OUTCOMES", "ClientPush", "Done", "LocalEndpoint", "ParameterClient",
    "ParameterShard", "Pending", "PushResult", "ServerSpec", "ShardEndpoint", "ShardLayout",
    "ShardStats", "UpdateRule", "make_optimizer", "merge_stats",
]
