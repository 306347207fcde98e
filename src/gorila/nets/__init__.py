"""Networks and the bridge between a torch module and the parameter server's flat vector."""

from gorila.nets.flat import FlatParams, soft_update

__all__ = ["FlatParams", "soft_update"]
