"""Which algorithms ``gorila train --algo`` knows: each has a config class and a ``train`` function.

Imports are lazy so that, say, ``--algo lstsq`` never imports torch.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Algorithm:
    name: str
    config: str  # "module:Class"
    train: str  # "module:function(run: RunConfig, cfg) -> summary dict"
    env_label: str | None = None  # run-dir label when the algorithm has no Gymnasium env

    def load(self, what: str):
        module, _, attr = getattr(self, what).partition(":")
        return getattr(importlib.import_module(module), attr)


ALGORITHMS = {
    "lstsq": Algorithm("lstsq", "gorila.algos.lstsq.config:LstsqConfig", "gorila.algos.lstsq.run:train",
                       env_label="synthetic"),
}
