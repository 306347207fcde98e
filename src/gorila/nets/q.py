"""Pick the Q-network for an observation space."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from gorila.errors import ConfigError
from gorila.nets.cnn import DuelingHead, NatureCNN
from gorila.nets.inputs import module_device, observation_tensor
from gorila.nets.minatar import MinAtarQNetwork, is_grid, numpy_minatar
from gorila.nets.mlp import mlp
from gorila.nets.numpy_conv import NumpyNetwork
from gorila.nets.numpy_mlp import NumpyMLP


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


def mlp_widths(net: nn.Module) -> tuple[int, ...] | None:
    """The widths ``(observation, hidden..., actions)`` of a plain (not dueling) vector-observation
    Q-network, which :class:`~gorila.nets.numpy_mlp.NumpyMLP` plays without torch; None for others."""
    if not isinstance(net, VectorQNetwork) or not isinstance(net.body, nn.Sequential):
        return None
    layers = list(net.body)
    linears = layers[0::2]
    if not all(isinstance(layer, nn.Linear) for layer in linears) or not all(
            type(layer) is nn.ReLU for layer in layers[1::2]) or len(layers) != 2 * len(linears) - 1:
        return None
    return (linears[0].in_features, *(layer.out_features for layer in linears))


def numpy_q_network(net: nn.Module) -> NumpyNetwork | None:
    """A plain MLP Q-network as an unset :class:`~gorila.nets.numpy_mlp.NumpyMLP`, or a plain
    MinAtar one as a :class:`~gorila.nets.numpy_conv.NumpyMinAtarNet` (the evaluator plays it without
    torch); None for others (see :func:`mlp_widths`, :func:`~gorila.nets.minatar.numpy_minatar`)."""
    widths = mlp_widths(net)
    return NumpyMLP(widths) if widths is not None else numpy_minatar(net)


def greedy_policy(net: nn.Module) -> Callable[[np.ndarray], np.ndarray]:
    """Batch of observations -> argmax-Q actions (for acting and for evaluation)."""
    return GreedyQ(net)


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
