"""Pick the Q-network for an observation space, and build Gorila DQN's and Ape-X's for an env from a seed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeAlias, TypeGuard

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from gorila.envs import env_spaces
from gorila.errors import ConfigError
from gorila.nets.cnn import DuelingHead, NatureCNN
from gorila.nets.flat import FlatParams
from gorila.nets.heads import ALGOS_FOR_BOX
from gorila.nets.inputs import module_device, observation_tensor
from gorila.nets.minatar import MinAtarQNetwork, is_grid, numpy_minatar
from gorila.nets.mlp import mlp
from gorila.nets.numpy_conv import NumpyMinAtarNet, NumpyNetwork
from gorila.nets.numpy_mlp import NumpyDueling, NumpyMLP


class VectorQNetwork(nn.Module):
    """An MLP over flat float observations (casts its input, so uint8 or float64 arrays work)::

        net = VectorQNetwork(4, (64, 64), 2)                 # CartPole
        net = VectorQNetwork(4, (64, 64), 2, dueling=True)   # the last hidden layer split in two streams
    """

    def __init__(self, in_dim: int, hidden: Sequence[int], n_actions: int, dueling: bool = False):
        super().__init__()
        if dueling:
            hidden = tuple(hidden)
            self.body = nn.Sequential(mlp(in_dim, hidden[:-1]), DuelingHead((in_dim, *hidden)[-2], hidden[-1:],
                                                                             n_actions))
        else:
            self.body = mlp(in_dim, hidden, n_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.body(obs.float().flatten(1))


def make_q_network(obs_space: gym.Space, n_actions: int, hidden: Sequence[int] = (64, 64),
                   dueling: bool = False) -> nn.Module:
    """The MLP for vector observations, the MinAtar network for ``(channels, height, width)``
    boolean grids, the Nature CNN for other ``(channels, height, width)`` images::

        q = make_q_network(env.observation_space, env.action_space.n)
        q = make_q_network(env.observation_space, env.action_space.n, dueling=True)

    ``hidden`` sizes the MLP's hidden layers; the convolutional networks' shapes are fixed by their papers.
    """
    if not isinstance(obs_space, gym.spaces.Box):
        raise ConfigError("env", f"Q-networks need a Box observation space, got {obs_space}")
    shape = obs_space.shape
    if is_grid(obs_space):
        return MinAtarQNetwork(n_actions, in_channels=shape[0], image_size=(shape[1], shape[2]), dueling=dueling)
    if len(shape) == 3:
        return NatureCNN(n_actions, in_channels=shape[0], image_size=(shape[1], shape[2]), dueling=dueling)
    if len(shape) == 1:
        return VectorQNetwork(shape[0], hidden, n_actions, dueling=dueling)
    raise ConfigError("env", f"no Q-network for observations of shape {shape}: "
                             "expected (features,) or (channels, height, width)")



def build_q_network(env_id: str, hidden: tuple[int, ...], seed: int, dueling: bool = False) -> nn.Module:
    """The Q-network for ``env_id`` (:func:`make_q_network`), initialised from ``seed``: every process
    that calls this gets the same architecture, and the driver takes initial parameters from it."""
    observation_space, action_space = env_spaces(env_id)
    if not isinstance(action_space, gym.spaces.Discrete):
        raise ConfigError("env", f"dqn and apex need Discrete actions; {env_id} has {action_space} "
                                 f"(Box actions are taken by {', '.join(ALGOS_FOR_BOX)})")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make_q_network(observation_space, int(action_space.n), hidden, dueling)

def _linear_widths(layers: nn.Module, relu_after_last: bool = False) -> tuple[int, ...] | None:
    """The widths ``(input, outputs...)`` of an ``nn.Sequential`` of ``nn.Linear`` layers with a ReLU
    between them (and after the last with ``relu_after_last``); None for anything else or an empty one."""
    if not isinstance(layers, nn.Sequential):
        return None
    modules = list(layers)
    linears, relus = modules[0::2], modules[1::2]
    if not linears or len(relus) != len(linears) - (0 if relu_after_last else 1) or not _all_linear(
            linears) or not all(type(layer) is nn.ReLU for layer in relus):
        return None
    return (linears[0].in_features, *(layer.out_features for layer in linears))


def _all_linear(layers: list[nn.Module]) -> TypeGuard[list[nn.Linear]]:
    return all(isinstance(layer, nn.Linear) for layer in layers)


def mlp_widths(net: nn.Module) -> tuple[int, ...] | None:
    """The widths ``(observation, hidden..., actions)`` of a plain (not dueling) vector-observation
    Q-network, which :class:`~gorila.nets.numpy_mlp.NumpyMLP` plays without torch; None for others."""
    return _linear_widths(net.body) if isinstance(net, VectorQNetwork) else None


def numpy_dueling(net: nn.Module) -> NumpyDueling | None:
    """A dueling MLP or MinAtar Q-network as an unset :class:`~gorila.nets.numpy_mlp.NumpyDueling`
    taking its whole flat vector; None for others (the Nature CNN, a plain network). Its layout is
    checked against the flat vector's order, as :func:`~gorila.nets.minatar.numpy_minatar` checks."""
    torso: nn.Module
    head: nn.Module
    if isinstance(net, VectorQNetwork) and len(net.body) == 2:
        torso, head = net.body[0], net.body[1]
        if not isinstance(torso, nn.Sequential) or not isinstance(head, DuelingHead):
            return None
        torso_widths = _linear_widths(torso, relu_after_last=True) if len(torso) else ()
        if torso_widths is None:
            return None
    elif isinstance(net, MinAtarQNetwork) and isinstance(net.head, DuelingHead):
        torso, head = net.features, net.head
    else:
        return None
    value, advantage = _linear_widths(head.value), _linear_widths(head.advantage)
    if value is None or advantage is None or len(value) != len(advantage):
        return None
    played = [*torso.parameters(), *head.value.parameters(), *head.advantage.parameters()]
    params = [p for p in net.parameters() if p.requires_grad]  # FlatParams' order
    if len(played) != len(params) or any(a is not b for a, b in zip(played, params)):
        return None
    stacked = tuple(v + a for v, a in zip(value[1:], advantage[1:]))  # the streams side by side
    inner: NumpyNetwork
    if isinstance(net, MinAtarQNetwork):
        conv = net.features[0]
        if not isinstance(conv, nn.Conv2d):
            return None
        inner = NumpyMinAtarNet(conv.in_channels, stacked, net.image_size, filters=conv.out_channels)
    else:
        inner = NumpyMLP((*(torso_widths or value[:1]), *stacked))
    return NumpyDueling(inner, sum(p.numel() for p in torso.parameters()), value, advantage)


def numpy_q_network(net: nn.Module) -> NumpyNetwork | None:
    """A Q-network's numpy twin, unset, taking its whole flat vector: a plain MLP's
    :class:`~gorila.nets.numpy_mlp.NumpyMLP`, a plain MinAtar one's
    :class:`~gorila.nets.numpy_conv.NumpyMinAtarNet`, a dueling one's (either)
    :class:`~gorila.nets.numpy_mlp.NumpyDueling`; None for others (the Nature CNN). The evaluator
    and the Q-actors play it without torch (see :func:`mlp_widths`,
    :func:`~gorila.nets.minatar.numpy_minatar`, :func:`numpy_dueling`)."""
    widths = mlp_widths(net)
    if widths is not None:
        return NumpyMLP(widths)
    plain = numpy_minatar(net)
    return plain if plain is not None else numpy_dueling(net)


class TorchQNetwork:
    """A torch Q-network behind the numpy twins' interface
    (:class:`~gorila.nets.numpy_conv.NumpyNetwork`): how a Q-actor acts with a network that has no
    twin (the Nature CNN)::

        q_net = TorchQNetwork(network_fn())
        q_net.set(flat)                 # the server's vector, loaded into the network
        q = q_net(obs); actions = q_net.greedy(obs)
    """

    def __init__(self, net: nn.Module):
        self.net = net.eval()
        self.flat = FlatParams(self.net)
        self.policy = GreedyQ(self.net)

    def set(self, flat: np.ndarray) -> None:
        self.flat.set(flat)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """The Q-values of a batch of observations, float32."""
        with torch.inference_mode():
            q: np.ndarray = self.net(observation_tensor(obs, self.policy.device)).cpu().numpy()
            return q

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        return self.policy(obs)


def greedy_policy(net: nn.Module) -> Callable[[np.ndarray], np.ndarray]:
    """Batch of observations -> argmax-Q actions (for acting and for evaluation)."""
    return GreedyQ(net)


#: ``(network_fn, policy_fn)`` of a Q-learning algorithm (Gorila DQN, Ape-X): what its builder's
#: ``evaluation_policy`` returns.
QEvaluationPolicy: TypeAlias = tuple[Callable[[], nn.Module], Callable[[nn.Module], Callable[[np.ndarray], np.ndarray]]]


class GreedyQ:
    """The argmax-Q policy of ``net``: ``GreedyQ(net)(obs_batch)`` -> actions. An object rather
    than a closure, so that an evaluator holding it can be saved (the local runtime's snapshot)."""

    def __init__(self, net: nn.Module):
        self.net = net
        self.device = module_device(net)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        # inference_mode skips the version counters and view tracking no_grad still keeps: this
        # runs once per actor step, where that overhead is a visible share of a small network's forward.
        with torch.inference_mode():
            return self.net(observation_tensor(obs, self.device)).argmax(1).cpu().numpy()
