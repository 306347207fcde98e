"""MinAtar observations: channels-first boolean grids, the MinAtar network chosen for them, and a
replay that keeps one bit per cell."""

import dataclasses
from importlib import metadata

import gymnasium as gym
import numpy as np
import pytest
import torch

from gorila.nets import FlatParams
from gorila.nets.actor_critic_env import network_for
from gorila.nets.cnn import DuelingHead, NatureCNN
from gorila.nets.minatar import MinAtarActorCritic, MinAtarQNetwork, is_grid
from gorila.nets.q import make_q_network
from gorila.replay.grids import PackedGridStorage
from gorila.replay.memory import estimate_storage_bytes, make_storage
from gorila.replay.storage import SCALAR_BYTES, TransitionStorage
from gorila.types import Transitions

# gymnasium's Box types leave out bool, which it supports (MinAtar's grids)
BREAKOUT = gym.spaces.Box(0, 1, (4, 10, 10), dtype=bool)  # type: ignore[arg-type]


def test_minatar_q_network_has_young_and_tians_shape_and_parameter_count():
    net = MinAtarQNetwork(n_actions=3, in_channels=4)
    conv, fc, out = 4 * 16 * 9 + 16, 16 * 8 * 8 * 128 + 128, 128 * 3 + 3
    assert sum(p.numel() for p in net.parameters()) == conv + fc + out
    assert net(torch.zeros(32, 4, 10, 10, dtype=torch.bool)).shape == (32, 3)


def test_dueling_minatar_q_network_splits_into_two_128_unit_streams():
    net = MinAtarQNetwork(n_actions=6, in_channels=10, dueling=True)
    q = net(torch.ones(5, 10, 10, 10, dtype=torch.bool))
    assert q.shape == (5, 6) and isinstance(net.head, DuelingHead)
    assert net.head.value[0].out_features == 128 and net.head.advantage[0].out_features == 128


def test_boolean_grids_and_their_float_values_give_the_same_q_values():
    net = MinAtarQNetwork(n_actions=3, in_channels=4)
    grid = torch.rand(8, 4, 10, 10) < 0.3
    assert torch.equal(net(grid), net(grid.float()))


def test_minatar_actor_critic_takes_any_leading_axes_and_groups_the_torso_with_the_policy():
    net = MinAtarActorCritic(n_actions=4, in_channels=6)
    logits, value = net(torch.zeros(7, 3, 6, 10, 10, dtype=torch.bool))
    assert logits.shape == (7, 3, 4) and value.shape == (7, 3)
    flat = FlatParams(net)
    policy, value_mask = net.param_groups(flat)
    assert value_mask.sum() == 128 + 1 and policy.sum() == flat.size - 129


def test_the_minatar_network_is_chosen_for_boolean_grids_and_the_nature_cnn_for_frames():
    assert is_grid(BREAKOUT) and not is_grid(gym.spaces.Box(0, 255, (4, 84, 84), dtype=np.uint8))
    assert isinstance(make_q_network(BREAKOUT, 3), MinAtarQNetwork)
    assert isinstance(make_q_network(gym.spaces.Box(0, 255, (4, 84, 84), dtype=np.uint8), 6), NatureCNN)
    assert isinstance(network_for(BREAKOUT, gym.spaces.Discrete(3), (64,), False), MinAtarActorCritic)


def _rows(n: int, shape: tuple[int, ...], rng: np.random.Generator) -> Transitions:
    grids = rng.random((n, *shape)) < 0.2
    return Transitions(obs=grids, action=rng.integers(0, 3, n), reward=np.ones(n, np.float32), next_obs=~grids,
                       terminated=np.zeros(n, bool), truncated=np.zeros(n, bool), env_index=np.zeros(n, np.int64),
                       discount=np.full(n, 0.99, np.float32), steps=np.ones(n, np.int64))


def test_replay_keeps_one_bit_per_cell_a_32nd_of_a_float32_store():
    capacity, cells = 1000, 4 * 10 * 10
    grids = make_storage(capacity, BREAKOUT.shape, BREAKOUT.dtype)
    floats = make_storage(capacity, BREAKOUT.shape, np.float32)
    assert isinstance(grids, PackedGridStorage) and type(floats) is TransitionStorage
    # Bytes per row: obs and next_obs, plus action, reward, discount and policy version.
    grid_row, float_row = grids.nbytes // capacity, floats.nbytes // capacity
    assert (grid_row, float_row) == (2 * cells // 8 + SCALAR_BYTES, 2 * cells * 4 + SCALAR_BYTES) == (124, 3224)
    assert (float_row - SCALAR_BYTES) / (grid_row - SCALAR_BYTES) == 32.0
    assert estimate_storage_bytes(capacity, BREAKOUT.shape, BREAKOUT.dtype) == grids.nbytes


@pytest.mark.parametrize("shape", [(4, 10, 10), (7, 10, 10), (3, 5, 3)])  # 45 cells: a partly filled last byte
def test_grids_come_back_from_replay_exactly_as_they_were_added(shape):
    rng = np.random.default_rng(0)
    storage = make_storage(64, shape, bool)
    rows = _rows(80, shape, rng)  # more than the capacity: the ring wraps
    slots, _ = storage.add(rows)
    batch = storage.gather(slots[-10:])
    assert batch.obs.dtype == batch.next_obs.dtype == np.bool_ and batch.obs.shape == (10, *shape)
    np.testing.assert_array_equal(batch.obs, rows.obs[-10:])
    np.testing.assert_array_equal(batch.next_obs, rows.next_obs[-10:])
    assert storage.sample(32, rng).obs.shape == (32, *shape)


def test_a_packed_replay_restores_from_its_state_dict():
    rng = np.random.default_rng(1)
    storage, restored = make_storage(16, BREAKOUT.shape, bool), make_storage(16, BREAKOUT.shape, bool)
    slots, _ = storage.add(_rows(10, BREAKOUT.shape, rng))
    restored.load_state_dict(storage.state_dict())
    np.testing.assert_array_equal(restored.gather(slots).obs, storage.gather(slots).obs)


def test_minatar_envs_are_channels_first_boolean_grids():
    pytest.importorskip("minatar")
    from gorila.envs import make_env

    env = make_env("MinAtar/SpaceInvaders-v1", seed=0, training=True)
    obs, _ = env.reset(seed=1)
    assert env.observation_space.shape == obs.shape == (6, 10, 10) and obs.dtype == np.bool_
    assert env.observation_space.contains(obs) and obs.any()
    obs, *_ = env.step(0)
    assert env.observation_space.contains(obs)


class _EntryPoint:
    """A ``gymnasium.envs`` entry point whose registration function records that it ran."""

    def __init__(self, calls: list):
        self.calls = calls

    def load(self):
        return lambda: self.calls.append("registered")


def _without_minatar(monkeypatch, entry_points):
    from gorila.envs import make

    registry = {k: v for k, v in gym.registry.items() if v.namespace != "MinAtar"}
    monkeypatch.setattr(gym, "registry", registry)  # the modules make.py reads them from
    monkeypatch.setattr(metadata, "entry_points", lambda group, name: entry_points if
                        (group, name) == ("gymnasium.envs", "MinAtar") else [])
    return make


def test_a_namespace_not_yet_registered_is_registered_through_its_packages_entry_point(monkeypatch):
    calls: list = []
    make = _without_minatar(monkeypatch, [_EntryPoint(calls)])
    make._register_namespace("MinAtar/Breakout-v1")
    make._register_namespace("CartPole-v1")  # no namespace: nothing to register
    assert calls == ["registered"]


def test_minatar_ids_without_the_package_name_the_extra_to_install(monkeypatch):
    from gorila.errors import ConfigError

    make = _without_minatar(monkeypatch, [])
    with pytest.raises(ConfigError, match=r"gorila\[minatar\]") as err:
        make._register_namespace("MinAtar/Breakout-v1")
    assert err.value.flag == "--env"


def test_an_actors_next_rows_reuse_the_packing_of_the_grids_they_start_from_and_only_those():
    rng = np.random.default_rng(2)
    storage = make_storage(16, BREAKOUT.shape, bool)
    first = _rows(4, BREAKOUT.shape, rng)
    following = dataclasses.replace(_rows(4, BREAKOUT.shape, rng), obs=first.next_obs)  # the very array: the next step
    unrelated = _rows(4, BREAKOUT.shape, rng)  # a new array of the same shape
    slots = [storage.add(rows)[0] for rows in (first, following, unrelated)]
    for rows, at in zip((first, following, unrelated), slots):
        batch = storage.gather(at)
        np.testing.assert_array_equal(batch.obs, rows.obs)
        np.testing.assert_array_equal(batch.next_obs, rows.next_obs)


def test_a_minatar_env_is_made_without_the_libraries_minatar_draws_with_and_still_draws_when_asked():
    """MinAtar imports matplotlib and seaborn (and through it SciPy) only to draw its games: seconds
    of start-up in every actor. A process that makes a MinAtar env loads none of them and its
    logging is left alone; one that renders frames gets them."""
    import subprocess
    import sys

    pytest.importorskip("minatar")
    script = """
import logging, sys
from gorila.envs.make import make_env
make_env("MinAtar/Breakout-v1", seed=0, training=True).reset(seed=0)
print(sorted(m for m in ("matplotlib", "seaborn", "scipy") if m in sys.modules), len(logging.root.handlers))
frame = make_env("MinAtar/Breakout-v1", seed=0, training=False, render_mode="rgb_array")
frame.reset(seed=0)
print(frame.render().shape)
"""
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", script], capture_output=True, text=True, timeout=120,
                         check=True)
    assert out.stdout.split("\n")[:2] == ["[] 0", "(10, 10, 3)"], out.stdout + out.stderr
    assert "Cannot import" not in out.stderr
