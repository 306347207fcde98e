"""gorila: parallel and distributed deep reinforcement learning.

Actors generate experience, learners turn it into gradients, and a sharded parameter
server applies them under an :class:`~gorila.params.UpdateRule` (synchronous,
asynchronous or semi-asynchronous). Components are plain Python objects; a runtime
(``local`` or ``ray``) places them.
"""

__version__ = "0.1.0"
