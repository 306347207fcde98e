"""What a snapshot may hold and create: the rules its writer and reader share."""

from __future__ import annotations

import enum
import functools
import sys
import threading
import types
from collections import Counter, OrderedDict, defaultdict
from pathlib import PurePath
from typing import Any

import numpy as np
import torch

from gorila.errors import CheckpointError

LOCKS = (type(threading.Lock()), type(threading.RLock()))
#: Where the classes a snapshot may create are defined (and their submodules).
CLASS_PACKAGES = ("gorila.", "gymnasium.", "minatar.", "torch.nn.modules.")
#: Values that are code: never saved, always taken from the fresh build.
CODE = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.BuiltinMethodType,
        types.ModuleType, functools.partial, np.ufunc, type, PurePath, property, staticmethod, classmethod)
#: Objects that are this run's settings, taken from the fresh build like code: an env's registration
#: names the code that makes it (its entry point).
SETTINGS = ("gymnasium.envs.registration:EnvSpec",)
BIT_GENERATORS = {"PCG64": np.random.PCG64, "PCG64DXSM": np.random.PCG64DXSM, "MT19937": np.random.MT19937,
                  "Philox": np.random.Philox, "SFC64": np.random.SFC64}
DICTS: dict[str, type] = {"dict": dict, "OrderedDict": OrderedDict, "Counter": Counter, "defaultdict": defaultdict}
#: What a saved defaultdict may make its missing values with.
FACTORIES: dict[str, type] = {"list": list, "dict": dict, "int": int, "float": float, "set": set}
KEY_TYPES = (type(None), bool, int, float, str, bytes, tuple)
#: Classes that have moved, by the names a snapshot written before the move gives them: a run saved
#: then resumes with each class where it lives now.
MOVED = {"gorila.envs.vector:Transitions": "gorila.types:Transitions",
         "gorila.envs.vector:Episode": "gorila.types:Episode",
         "gorila.trajectory.segment:Segment": "gorila.types:Segment",
         "gorila.replay.storage:Batch": "gorila.types:Batch",
         "gorila.params.optim:LinearDecay": "gorila.params.learning_rate:LinearDecay",
         "gorila.algos.a3c.networks:GreedyPolicy": "gorila.nets.actor_critic_env:GreedyPolicy",
         "gorila.learners.impala:ImpalaLearner": "gorila.agents.impala.learner:ImpalaLearner",
         "gorila.losses.impala:ImpalaLoss": "gorila.agents.impala.loss:ImpalaLoss",
         "gorila.learners.ppo:PPOLearner": "gorila.agents.ppo.learner:PPOLearner",
         "gorila.losses.ppo_targets:PPOLoss": "gorila.agents.ppo.loss:PPOLoss",
         "gorila.learners.a3c:A3CWorker": "gorila.agents.a3c.learner:A3CWorker",
         "gorila.losses.a3c:A3CLoss": "gorila.agents.a3c.loss:A3CLoss",
         "gorila.learners.bundle:Bundle": "gorila.agents.dqn.bundle:Bundle"}


def plain_key(value: Any, where: str) -> Any:
    """A mapping's key or a set's member: plain values only, whose hashing runs no class's code."""
    if not isinstance(value, KEY_TYPES) or (type(value) is tuple and not all(isinstance(v, KEY_TYPES)
                                                                              for v in value)):
        raise CheckpointError(f"{where}: a key of type {type(value).__name__}, which a snapshot may not hold")
    return value


def class_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def creatable(cls: type) -> bool:
    """Whether a snapshot may create an object of ``cls``: defined in a package it names, made
    without code of its own (``object.__new__``, or a named tuple's), and with no ``__del__``."""
    if not (cls.__module__ + ".").startswith(CLASS_PACKAGES) or "." in cls.__qualname__:
        return False
    if any("__del__" in vars(base) for base in cls.__mro__[:-1]):
        return False
    if issubclass(cls, tuple):  # made with tuple.__new__, whatever the class says
        return hasattr(cls, "_fields")
    return issubclass(cls, enum.Enum) or cls.__new__ is object.__new__


def named_class(name: Any) -> type:
    """The class a snapshot names, from a module this process has already imported: a snapshot
    never imports a module."""
    if not isinstance(name, str) or name.count(":") != 1:
        raise CheckpointError(f"the snapshot names a class {str(name)[:80]!r}")
    name = MOVED.get(name, name)
    module_name, qualname = name.split(":")
    module = sys.modules.get(module_name)
    cls = getattr(module, qualname, None) if module is not None else None
    if not isinstance(cls, type) or class_name(cls) != name or not creatable(cls):
        raise CheckpointError(f"the snapshot names {name[:120]}, which a snapshot may not create")
    return cls


def slots(cls: type) -> set[str]:
    names = {s for base in cls.__mro__ for s in vars(base).get("__slots__", ())}
    return names - {"__dict__", "__weakref__"}


def dtype_name(dtype: np.dtype) -> str:
    return dtype.str


def array_dtype(name: Any, where: str) -> np.dtype:
    dtype = np.dtype(str(name))
    if dtype.kind not in "biuf":
        raise CheckpointError(f"{where}: an array of {dtype}, which a snapshot may not hold")
    return dtype


def torch_dtype(name: Any, where: str) -> torch.dtype:
    dtype = getattr(torch, str(name), None)
    if not isinstance(dtype, torch.dtype):
        raise CheckpointError(f"{where}: no torch dtype {str(name)[:40]!r}")
    return dtype
