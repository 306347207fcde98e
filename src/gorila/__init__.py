"""gorila: parallel and distributed deep reinforcement learning.

Actors generate experience, learners turn it into gradients, and a sharded parameter
server applies them under an :class:`~gorila.params.UpdateRule` (synchronous,
asynchronous or semi-asynchronous). Components are plain Python objects; a runtime
(``local`` or ``ray``) places them.

::

    import gorila
    summary = gorila.train("dqn", env="CartPole-v1", actors=2, time_limit_s=60)
    report = gorila.evaluate(summary["run_dir"], episodes=10)
    policy = gorila.load_policy(summary["run_dir"])

``train`` (:mod:`gorila.api`), ``evaluate``, ``load_policy`` and ``Policy`` (:mod:`gorila.policy`)
are loaded on first use, so ``import gorila`` stays cheap: processes that never train (an lstsq
worker) never import PyTorch. It imports nothing itself: the ``gorila`` command cleans the import
path before anything is looked up on it (:mod:`gorila.entry`).
"""

TYPE_CHECKING = False  # typing's own flag, without importing typing (mypy reads this name as it)

__version__ = "0.1.0"

_LAZY = {"train": "gorila.api", "evaluate": "gorila.policy", "load_policy": "gorila.policy",
         "Policy": "gorila.policy"}

if TYPE_CHECKING:
    # the type checker sees the names themselves, so a name not here is an error rather than `Any`
    from gorila.api import train as train
    from gorila.policy import Policy as Policy
    from gorila.policy import evaluate as evaluate
    from gorila.policy import load_policy as load_policy
else:
    def __getattr__(name: str) -> object:
        if name in _LAZY:
            import importlib

            return getattr(importlib.import_module(_LAZY[name]), name)
        raise AttributeError(f"module 'gorila' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
