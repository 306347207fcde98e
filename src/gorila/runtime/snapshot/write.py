"""Writing a snapshot: live objects to a JSON tree and the arrays it names."""

from __future__ import annotations

import base64
import enum
import random
from collections import Counter, OrderedDict, defaultdict, deque
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from gorila.runtime.snapshot.rules import (
    BIT_GENERATORS,
    CODE,
    FACTORIES,
    LOCKS,
    SETTINGS,
    class_name,
    creatable,
    dtype_name,
    slots,
)


class Encoder:
    """Objects to a JSON tree (``encode``, rows in ``table``) and the arrays it names (``arrays``)."""

    def __init__(self, shared: Mapping[str, Any]):
        self.shared = {id(obj): name for name, obj in shared.items()}
        self.table: list[Any] = []
        self.arrays: dict[str, np.ndarray] = {}
        self._index: dict[int, int] = {}  # id(object) -> its row in the table
        self._memories: dict[Any, int] = {}  # a numpy root's id or a storage's address -> memory number
        self._alive: list[Any] = []  # what was indexed by id, kept until the end so no id is reused

    def encode(self, value: Any, where: str) -> Any:
        if value is None or type(value) in (bool, int, float, str):
            return value
        if id(value) in self.shared:
            return {"$": "shared", "name": self.shared[id(value)]}
        if isinstance(value, CODE) or class_name(type(value)) in SETTINGS or (
                callable(value) and not creatable(type(value)) and not isinstance(value, torch.Tensor)):
            return {"$": "code"}
        if type(value) is tuple:
            return {"$": "tuple", "v": [self.encode(v, f"{where}[{k}]") for k, v in enumerate(value)]}
        if isinstance(value, tuple) and hasattr(type(value), "_fields") and creatable(type(value)):
            return {"$": "ntuple", "cls": class_name(type(value)),
                    "v": [self.encode(v, f"{where}.{f}") for f, v in zip(getattr(type(value), "_fields"), value)]}
        inline = self._inline(value)
        if inline is not None:
            return inline
        if id(value) not in self._index:
            self._index[id(value)] = len(self.table)
            self._alive.append(value)
            self.table.append(None)  # the row is taken first: what it holds may refer back to it
            self.table[self._index[id(value)]] = self._row(value, where)
        return {"$": "ref", "i": self._index[id(value)]}

    def _inline(self, value: Any) -> dict[str, Any] | None:
        if type(value) is bytes:
            return {"$": "bytes", "v": base64.b64encode(value).decode()}
        if type(value) is frozenset:
            return {"$": "frozenset", "v": [self.encode(v, "frozenset") for v in value]}
        if type(value) is slice:
            return {"$": "slice", "v": [self.encode(v, "slice") for v in (value.start, value.stop, value.step)]}
        if type(value) is range:
            return {"$": "range", "v": [value.start, value.stop, value.step]}
        if type(value) is complex:
            return {"$": "complex", "v": [value.real, value.imag]}
        if isinstance(value, np.generic):
            return {"$": "npscalar", "dtype": dtype_name(value.dtype), "v": value.item()}
        if isinstance(value, np.dtype):
            return {"$": "dtype", "v": dtype_name(value)}
        if isinstance(value, torch.dtype):
            return {"$": "tdtype", "v": str(value).removeprefix("torch.")}
        if isinstance(value, torch.device):
            return {"$": "device", "v": str(value)}
        if isinstance(value, enum.Enum) and creatable(type(value)):
            return {"$": "enum", "cls": class_name(type(value)), "v": value.name}
        return None

    def _row(self, value: Any, where: str) -> dict[str, Any]:
        kind = type(value)
        if kind is list:
            return {"$": "list", "v": [self.encode(v, f"{where}[{k}]") for k, v in enumerate(value)]}
        if kind in (dict, OrderedDict, Counter, defaultdict):
            row: dict[str, Any] = {"$": "dict", "kind": kind.__name__,
                                   "k": [self.encode(k, f"{where} key") for k in value],
                                   "v": [self.encode(v, f"{where}[{k!r}]") for k, v in value.items()]}
            if kind is defaultdict:
                factory = getattr(value.default_factory, "__name__", None)
                if value.default_factory not in FACTORIES.values():
                    raise TypeError(f"{where}: a defaultdict of {factory} cannot be saved")
                row["factory"] = factory
            return row
        if kind is set:
            return {"$": "set", "v": [self.encode(v, f"{where} member") for v in value]}
        if kind is deque:
            return {"$": "deque", "maxlen": value.maxlen, "v": [self.encode(v, f"{where}[{k}]")
                                                                 for k, v in enumerate(value)]}
        if kind is bytearray:
            return {"$": "bytearray", "v": base64.b64encode(value).decode()}
        if kind is np.ndarray:
            return self._array(value, where)
        if kind in (torch.Tensor, torch.nn.Parameter):
            return self._tensor(value, where)
        if kind is np.random.Generator:
            bit = type(value.bit_generator).__name__
            if bit not in BIT_GENERATORS:
                raise TypeError(f"{where}: a numpy Generator on {bit} cannot be saved")
            return {"$": "npgen", "bit": bit, "state": self.encode(value.bit_generator.state, f"{where}.state")}
        if kind is np.random.RandomState:
            return {"$": "randomstate", "state": self.encode(value.get_state(), f"{where}.state")}
        if kind is random.Random:
            return {"$": "pyrandom", "state": self.encode(value.getstate(), f"{where}.state")}
        if kind is torch.Generator:
            return {"$": "tgen", "state": self._tensor(value.get_state(), f"{where}.state")}
        if kind in LOCKS:
            return {"$": "lock", "reentrant": kind is LOCKS[1]}
        if creatable(kind):
            return {"$": "object", "cls": class_name(kind), "state": self._attributes(value, where)}
        raise TypeError(f"{where}: a {kind.__module__}.{kind.__qualname__} cannot be saved")

    def _attributes(self, value: Any, where: str) -> dict[str, Any]:
        state = dict(getattr(value, "__dict__", {}))
        state.update((s, getattr(value, s)) for s in slots(type(value)) if hasattr(value, s))
        return {name: self.encode(v, f"{where}.{name}") for name, v in state.items()}

    def _array(self, value: np.ndarray, where: str) -> dict[str, Any]:
        if value.dtype.kind not in "biuf":
            raise TypeError(f"{where}: an array of {value.dtype} cannot be saved")
        root: Any = value
        while isinstance(root.base, np.ndarray):
            root = root.base
        if isinstance(root.base, torch.Tensor):  # a numpy view of a tensor (a flat gradient buffer)
            memory = self._tensor(root.base, where)["mem"]
            start = root.base.untyped_storage().data_ptr()
        elif root.flags.c_contiguous and root.dtype.kind in "biuf":
            memory = self._memory(id(root), root, lambda: np.ascontiguousarray(root))
            start = root.__array_interface__["data"][0]
        else:  # not a view worth keeping: saved as an array of its own
            memory = self._memory(id(value), value, lambda: np.ascontiguousarray(value))
            return {"$": "array", "mem": memory, "whole": True}
        offset = value.__array_interface__["data"][0] - start
        return {"$": "array", "mem": memory, "whole": value is root and not isinstance(root.base, torch.Tensor),
                "offset": offset, "shape": list(value.shape), "strides": list(value.strides),
                "dtype": dtype_name(value.dtype), "writeable": bool(value.flags.writeable)}

    def _tensor(self, value: torch.Tensor, where: str) -> dict[str, Any]:
        if value.device.type != "cpu":
            raise TypeError(f"{where}: a tensor on {value.device}: snapshots keep the local runtime's CPU state only")
        storage = value.untyped_storage()
        memory = self._memory(("storage", storage.data_ptr(), storage.nbytes()), storage,
                              lambda: torch.empty(0, dtype=torch.uint8).set_(storage).numpy().copy(), torch=True)
        return {"$": "tensor", "mem": memory, "dtype": str(value.dtype).removeprefix("torch."),
                "offset": value.storage_offset(), "size": list(value.shape), "stride": list(value.stride()),
                "grad": bool(value.requires_grad), "param": isinstance(value, torch.nn.Parameter)}

    def _memory(self, key: Any, owner: Any, data: Callable[[], np.ndarray], torch: bool = False) -> int:
        if key not in self._memories:
            self._memories[key] = len(self._memories)
            self._alive.append(owner)
            self.arrays[f"m{self._memories[key]}"] = data()
            self.arrays[f"t{self._memories[key]}"] = np.array([1 if torch else 0], np.uint8)
        return self._memories[key]
