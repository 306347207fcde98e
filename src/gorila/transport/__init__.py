"""How processes on one node hand each other arrays without copying them through a serializer.

===========  ==============================================================================
module       what it holds
===========  ==============================================================================
``shm``      a client's anonymous shared-memory block handed to a server once over a private
             Unix socket: the listener, the handshake on both sides, stale socket dirs swept
===========  ==============================================================================

Used by the parameter shards' fast path (:mod:`gorila.runtime.shm`) and by central inference
(:mod:`gorila.inference.channel`); each speaks its own requests and replies over the socket.
"""
