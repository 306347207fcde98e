"""Networks and the bridge between a torch module and the parameter server's flat vector.

``FlatParams`` and ``soft_update`` are loaded on first use, so that :mod:`gorila.nets.numpy_mlp`
(a plain MLP's forward pass in numpy) imports without torch."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["FlatParams", "soft_update"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("gorila.nets.flat"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
