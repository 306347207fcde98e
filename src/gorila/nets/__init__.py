"""Networks and the bridge between a torch module and the parameter server's flat vector."""

from gorila.nets.flat import FlatParams

__all__ = ["FlatParams"]
