"""What a user keeps of a recurrent run (``--core lstm``, local runtime): a stateful policy from
``gorila.load_policy`` and ``gorila.evaluate``, and an exported network that says what its state is."""

import json

import numpy as np
import pytest
import safetensors

import gorila


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("recurrent") / "run"
    gorila.train("impala", run_dir=run_dir, env="gorila/MemoryLength-v0", runtime="local", seed=0, core="lstm",
                 core_size=8, hidden=(8,), total_steps=600, eval_episodes=2, eval_every_steps=300)
    return run_dir


def test_a_loaded_recurrent_policy_remembers_until_it_is_reset(run_dir):
    policy = gorila.load_policy(run_dir)
    assert policy.state_shape == (2, 8)
    env = policy.make_env(seed=0)
    obs, _ = env.reset(seed=0)
    policy.reset()
    policy.step(obs)
    first = policy.state
    assert first is not None and first.shape == (1, 2, 8) and np.abs(first).sum() > 0
    policy.step(np.zeros(3, np.float32))
    assert not np.array_equal(policy.state, first)  # carried on: the same input now meets another state
    policy.reset()
    policy.step(obs)
    np.testing.assert_array_equal(policy.state, first)  # from zero again
    with pytest.raises(ValueError, match=r"reset\(batch=2\)"):
        policy.step(np.zeros((2, 3), np.float32))
    policy.reset(batch=2)
    assert policy.step(np.stack([obs, obs])).shape == (2,)


def test_gorila_evaluate_plays_a_recurrent_policy_and_its_export_says_what_its_state_is(run_dir):
    report = gorila.evaluate(run_dir, episodes=3)
    assert len(report["scores"]) == 3 and set(report["scores"]) <= {-1.0, 1.0}
    sidecar = json.loads(max((run_dir / "checkpoints").glob("ckpt-*[0-9].json")).read_text())
    export = run_dir / "checkpoints" / sidecar["exports"]["model"]
    with safetensors.safe_open(export, "pt") as f:
        notes = f.metadata()
        assert "core.weight_hh_l0" in f.keys()
    assert notes["core"] == "lstm" and notes["core_size"] == "8" and "zero at the start of every episode" in notes[
        "core_state"]
