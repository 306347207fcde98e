"""Networks and the bridge between a torch module and the parameter server's flat vector.

``FlatParams`` and ``soft_update`` are loaded on first use, so that :mod:`gorila.nets.numpy_mlp`
(a plain MLP's forward pass in numpy) imports without torch."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__all__ = ["FlatParams", "soft_update"]

if TYPE_CHECKING:
    # the type checker sees the names themselves, so a name not here is an error rather than `Any`
    from gorila.nets.flat import FlatParams, soft_update
else:
    def __getattr__(name: str) -> object:
        if name in __all__:
            return getattr(importlib.import_module("gorila.nets.flat"), name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
