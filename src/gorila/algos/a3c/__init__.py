"""A3C: asynchronous advantage actor-critic on the parameter server."""
