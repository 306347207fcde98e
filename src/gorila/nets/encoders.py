"""The convolutional encoders of stacked Atari frames that an actor-critic's torso is built on (``--encoder``).

- ``nature``: conv 32 8×8 stride 4, conv 64 4×4/2, conv 64 3×3/1, fc 512 (1.69 M parameters in
  Pong's actor-critic). Mnih et al. 2015, the Nature DQN's; TorchBeast's IMPALA Atari network.
- ``mnih2013``: conv 16 8×8/4, conv 32 4×4/2, fc 256 (0.68 M). Mnih et al. 2013; A3C's network
  (Mnih et al. 2016); IMPALA's shallow network without its LSTM (Espeholt et al. 2018).

Every layer is followed by a ReLU. ``mnih2013`` costs about a third of ``nature``'s arithmetic; on one
core of the 2-core development machine its learner takes about twice the samples a second
(``gorila bench learner --algo impala --env ALE/Pong-v5 --encoder E``, ``docs/benchmarks.md``)::

    features, n_features, width = conv_encoder("mnih2013", in_channels=4, image_size=(84, 84))
    torso = nn.Sequential(features, nn.Linear(n_features, width), nn.ReLU())    # (B, 4, 84, 84) -> (B, 256)
"""

from __future__ import annotations

import torch
from torch import nn

ENCODERS = ("nature", "mnih2013")
ENCODER_HELP = ("image observations (Atari's frames): the convolutions of the shared torso, nature (Mnih et al. 2015: "
                "3 convolutions, fc 512) or mnih2013 (Mnih et al. 2013 and A3C's: 2 convolutions, fc 256, about twice "
                "the learner's samples a second on a CPU; with --core lstm, IMPALA's shallow network)")

#: ``(out_channels, kernel, stride)`` of each convolution, and the width of the layer after them.
_LAYERS: dict[str, tuple[tuple[tuple[int, int, int], ...], int]] = {
    "nature": (((32, 8, 4), (64, 4, 2), (64, 3, 1)), 512),
    "mnih2013": (((16, 8, 4), (32, 4, 2)), 256),
}


def conv_encoder(name: str, in_channels: int, image_size: tuple[int, int]) -> tuple[nn.Sequential, int, int]:
    """``(features, n_features, width)``: the encoder's convolutions (each followed by a ReLU, then
    flattened), how many features they give for ``image_size``, and the width of the fully connected
    layer the encoder puts after them (not built here: its owner names it)."""
    if name not in _LAYERS:
        raise ValueError(f"unknown encoder {name!r}; choose from {', '.join(ENCODERS)}")
    convolutions, width = _LAYERS[name]
    layers: list[nn.Module] = []
    channels = in_channels
    for out_channels, kernel, stride in convolutions:
        layers += [nn.Conv2d(channels, out_channels, kernel_size=kernel, stride=stride), nn.ReLU()]
        channels = out_channels
    features = nn.Sequential(*layers, nn.Flatten())
    with torch.no_grad():
        n_features = features(torch.zeros(1, in_channels, *image_size)).shape[1]
    return features, int(n_features), width
