"""gorila.mapreduce on the local runtime: the chapter's reductions over shards held by workers, the
least-squares gradient written on it, and the sharded mean and variance example."""

import functools
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from gorila.agents.lstsq.learner import residual_gradients
from gorila.envs.least_squares import LeastSquares
from gorila.errors import ConfigError
from gorila.mapreduce import DataShard, MapReduce, Partial, reduce, rows_of
from gorila.runtime import make_runtime

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sharded_moments.py"


def load_example():
    spec = importlib.util.spec_from_file_location("sharded_moments", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shard_of(k, blocks):
    return DataShard(blocks[k])


def double(x, factor):
    return x * factor


@pytest.fixture
def runtime():
    rt = make_runtime("local")
    yield rt
    rt.shutdown()


BLOCKS = [np.arange(6, dtype=np.float64).reshape(3, 2), np.array([[10.0, 20.0]]),
          np.arange(8, dtype=np.float64).reshape(4, 2) - 3]
ALL = np.concatenate(BLOCKS)


def test_sum_mean_and_count_reduce_every_row_of_every_shard(runtime):
    job = MapReduce(runtime, functools.partial(shard_of, blocks=BLOCKS), count=3)
    np.testing.assert_array_equal(job.run(rows_of, "sum"), ALL.sum(axis=0))
    np.testing.assert_allclose(job.run(rows_of, "mean"), ALL.mean(axis=0))  # by rows, not a mean of means
    assert job.run(rows_of, "count") == 8


def test_broadcast_arguments_reach_every_shard_s_map(runtime):
    job = MapReduce(runtime, functools.partial(shard_of, blocks=BLOCKS), count=3)
    np.testing.assert_array_equal(job.run(double, "sum", 3.0), 3.0 * ALL.sum(axis=0))
    assert [p.count for p in job.partials(double, 1.0)] == [3, 1, 4]


def test_an_unknown_combiner_is_refused_by_name(runtime):
    job = MapReduce(runtime, functools.partial(shard_of, blocks=BLOCKS), count=3)
    with pytest.raises(ConfigError, match="combiner"):
        job.run(rows_of, "max")


def test_partials_add_and_a_mean_of_nothing_is_an_error():
    assert reduce("count", [Partial(np.zeros(2), 3), Partial(np.ones(2), 4)]) == 7
    with pytest.raises(ValueError, match="mean of no values"):
        reduce("mean", [Partial(np.zeros(2), 0)])
    with pytest.raises(ValueError, match="as many rows"):
        DataShard(np.zeros(3), np.zeros(4))


def test_lstsq_gradient_on_mapreduce_is_the_full_batch_gradient(runtime):
    problem = LeastSquares(2000, 5, 0.1, 10.0, seed=3)
    parts = problem.partition(3)

    def factory(k):
        return DataShard(*problem.rows(parts[k]))

    w = np.linspace(-1, 1, 5).astype(np.float32)
    job = MapReduce(runtime, factory, count=3)
    mean = job.run(residual_gradients, "sum", w) / job.run(rows_of, "count")
    np.testing.assert_allclose(mean, problem.moments().gradient(w), rtol=1e-4, atol=1e-5)


def test_the_sharded_moments_example_matches_numpy_over_the_whole_data_set():
    example = load_example()
    out = example.moments("local", shards=3, rows=500, columns=2, seed=7)
    rows = np.concatenate([example.make_shard(k, 500, 2, 7).arrays[0] for k in range(3)]).astype(np.float64)
    assert out["rows"] == 1500
    np.testing.assert_allclose(out["mean"], rows.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(out["variance"], rows.var(axis=0), rtol=1e-9)
