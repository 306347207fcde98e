"""Reading a snapshot: a JSON tree back to objects, never running code the tree names."""

from __future__ import annotations

import base64
import enum
import random
import threading
import types
from collections import defaultdict, deque
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

import numpy as np
import torch

from gorila.errors import CheckpointError
from gorila.runtime.snapshot.rules import (
    BIT_GENERATORS,
    DICTS,
    FACTORIES,
    SETTINGS,
    array_dtype,
    class_name,
    named_class,
    plain_key,
    slots,
    torch_dtype,
)


class Decoder:
    """A JSON tree back to objects (``decode``), joined to ``fresh`` ones where given."""

    def __init__(self, table: Any, arrays: dict[str, np.ndarray], shared: Mapping[str, Any]):
        self.table, self.arrays, self.shared = table, arrays, shared
        self.objects: dict[int, Any] = {}  # row -> what it was read as
        self.memories: dict[int, Any] = {}  # memory number -> a numpy root or a torch storage
        self.claimed: set[int] = set()  # ids of fresh buffers already loaded into

    def decode(self, node: Any, fresh: Any, where: str) -> Any:
        if node is None or type(node) in (bool, int, float, str):
            return node
        if type(node) is list:  # only rows hold lists, as {"$": "list"}
            raise CheckpointError(f"{where}: a bare list in the snapshot")
        kind = node["$"]
        if kind == "ref":
            row = int(node["i"])
            if row not in self.objects:
                self._row(row, self.table[row], fresh, where)
            return self.objects[row]
        if kind == "code":
            if fresh is None or not (callable(fresh) or isinstance(fresh, (PurePath, types.ModuleType))
                                     or class_name(type(fresh)) in SETTINGS):
                raise CheckpointError(f"{where}: the snapshot marks code there, and this run builds none there; "
                                      "a snapshot never carries code")
            return fresh
        if kind == "shared":
            if node["name"] not in self.shared:
                raise CheckpointError(f"{where}: the snapshot refers to {node['name']!r}, which this run does not have")
            return self.shared[node["name"]]
        if kind in ("tuple", "frozenset"):
            items = _pair(node["v"], fresh if type(fresh) is tuple else None)
            values: Any = [self.decode(v, f, f"{where}[{k}]") for k, (v, f) in enumerate(items)]
            return tuple(values) if kind == "tuple" else frozenset(plain_key(v, where) for v in values)
        if kind == "ntuple":
            cls = named_class(node["cls"])
            if not issubclass(cls, tuple) or not hasattr(cls, "_fields"):
                raise CheckpointError(f"{where}: {node['cls']} is not a named tuple")
            items = _pair(node["v"], fresh if type(fresh) is cls else None)
            return tuple.__new__(cls, [self.decode(v, f, f"{where}[{k}]") for k, (v, f) in enumerate(items)])
        return self._inline(kind, node, where)

    def _inline(self, kind: str, node: dict[str, Any], where: str) -> Any:
        value = node["v"]
        if kind == "bytes":
            return base64.b64decode(value)
        if kind == "slice":
            return slice(*(self.decode(v, None, where) for v in value))
        if kind == "range":
            return range(*(int(v) for v in value))
        if kind == "complex":
            return complex(float(value[0]), float(value[1]))
        if kind == "npscalar":
            return array_dtype(node["dtype"], where).type(value)
        if kind == "dtype":
            return array_dtype(value, where)
        if kind == "tdtype":
            return torch_dtype(value, where)
        if kind == "device":
            return torch.device(str(value))
        if kind == "enum":
            cls = named_class(node["cls"])
            if not issubclass(cls, enum.Enum):
                raise CheckpointError(f"{where}: {node['cls']} is not an enumeration")
            return cls[str(value)]
        raise CheckpointError(f"{where}: the snapshot holds a {kind!r}, which a snapshot may not hold")

    def _row(self, row: int, node: dict[str, Any], fresh: Any, where: str) -> None:
        kind = node["$"]
        out: Any
        if kind == "list":
            out = fresh if type(fresh) is list else []
            self.objects[row] = out
            items = _pair(node["v"], list(out))
            out[:] = [self.decode(v, f, f"{where}[{k}]") for k, (v, f) in enumerate(items)]
        elif kind == "dict":
            self._dict(row, node, fresh, where)
        elif kind == "set":
            self.objects[row] = out = fresh if type(fresh) is set else set()
            out.clear()
            out.update(plain_key(self.decode(v, None, where), where) for v in node["v"])
        elif kind == "deque":
            maxlen = node["maxlen"]
            out = fresh if type(fresh) is deque and fresh.maxlen == maxlen else deque(maxlen=maxlen)
            self.objects[row] = out
            items = _pair(node["v"], list(out))
            out.clear()
            out.extend(self.decode(v, f, f"{where}[{k}]") for k, (v, f) in enumerate(items))
        elif kind == "bytearray":
            self.objects[row] = bytearray(base64.b64decode(node["v"]))
        elif kind == "array":
            self.objects[row] = self._array(node, fresh, where)
        elif kind == "tensor":
            self.objects[row] = self._tensor(node, fresh, where)
        elif kind == "lock":
            self.objects[row] = threading.RLock() if node["reentrant"] else threading.Lock()
        else:
            self._state_row(row, kind, node, fresh, where)

    def _state_row(self, row: int, kind: str, node: dict[str, Any], fresh: Any, where: str) -> None:
        out: Any
        if kind == "npgen":
            bit = BIT_GENERATORS.get(node["bit"])
            if bit is None:
                raise CheckpointError(f"{where}: no bit generator {node['bit']!r}")
            out = fresh if type(fresh) is np.random.Generator and type(fresh.bit_generator) is bit \
                else np.random.Generator(bit())
            out.bit_generator.state = self.decode(node["state"], None, where)
        elif kind == "randomstate":
            out = fresh if type(fresh) is np.random.RandomState else np.random.RandomState()
            out.set_state(self.decode(node["state"], None, where))
        elif kind == "pyrandom":
            out = fresh if type(fresh) is random.Random else random.Random()
            out.setstate(self.decode(node["state"], None, where))
        elif kind == "tgen":
            out = fresh if type(fresh) is torch.Generator else torch.Generator()
            out.set_state(self._tensor(node["state"], None, where).clone())
        elif kind == "object":
            cls = named_class(node["cls"])
            out = fresh if type(fresh) is cls else object.__new__(cls)
            self.objects[row] = out
            state = node["state"]
            if not isinstance(state, dict):
                raise CheckpointError(f"{where}: an object's state is not a mapping")
            for name, value in state.items():
                current = (vars(out).get(name) if hasattr(out, "__dict__") else getattr(out, name, None)) \
                    if out is fresh else None
                decoded = self.decode(value, current, f"{where}.{name}")
                if hasattr(out, "__dict__") and name not in slots(cls):
                    vars(out)[name] = decoded  # as pickle sets it: no __setattr__ of the class runs
                else:
                    object.__setattr__(out, name, decoded)
            return
        else:
            raise CheckpointError(f"{where}: the snapshot holds a {kind!r}, which a snapshot may not hold")
        self.objects[row] = out

    def _dict(self, row: int, node: dict[str, Any], fresh: Any, where: str) -> None:
        cls = DICTS.get(node["kind"])
        if cls is None:
            raise CheckpointError(f"{where}: no mapping kind {node['kind']!r}")
        if cls is defaultdict:
            factory = FACTORIES.get(str(node.get("factory")))
            if factory is None:
                raise CheckpointError(f"{where}: a defaultdict may not make its values with {node.get('factory')!r}")
            out: Any = fresh if type(fresh) is defaultdict and fresh.default_factory is factory \
                else defaultdict(factory)
        else:
            out = fresh if type(fresh) is cls else cls()
        self.objects[row] = out
        before = dict(out)
        out.clear()
        for k, v in zip(node["k"], node["v"], strict=True):
            key = plain_key(self.decode(k, None, f"{where} key"), where)
            out[key] = self.decode(v, before.get(key), f"{where}[{key!r}]")

    def _memory(self, number: int, fresh_root: Any, where: str) -> Any:
        """Memory ``number``: a numpy array, or a torch storage; copied into ``fresh_root`` (the
        fresh build's buffer at the same place) where it fits and no other memory took it."""
        if number in self.memories:
            return self.memories[number]
        data = self.arrays[f"m{int(number)}"]
        is_torch = bool(self.arrays[f"t{int(number)}"][0])
        if is_torch:
            if isinstance(fresh_root, torch.UntypedStorage) and fresh_root.nbytes() == data.nbytes \
                    and fresh_root.data_ptr() not in self.claimed and fresh_root.device.type == "cpu":
                torch.empty(0, dtype=torch.uint8).set_(fresh_root).copy_(torch.from_numpy(data))
                self.claimed.add(fresh_root.data_ptr())
                out: Any = fresh_root
            else:
                out = torch.from_numpy(np.array(data, dtype=np.uint8)).untyped_storage()
        elif isinstance(fresh_root, np.ndarray) and fresh_root.shape == data.shape and fresh_root.dtype == data.dtype \
                and fresh_root.flags.writeable and fresh_root.flags.c_contiguous and id(fresh_root) not in self.claimed:
            fresh_root[...] = data
            self.claimed.add(id(fresh_root))
            out = fresh_root
        else:
            out = np.array(data)
        self.memories[number] = out
        return out

    def _array(self, node: dict[str, Any], fresh: Any, where: str) -> np.ndarray:
        root: Any = fresh if isinstance(fresh, np.ndarray) else None
        while root is not None and isinstance(root.base, np.ndarray):
            root = root.base
        number = int(node["mem"])
        if bool(self.arrays[f"t{number}"][0]):  # a numpy view of a tensor's storage
            storage = self._memory(number, root.base.untyped_storage() if root is not None
                                   and isinstance(root.base, torch.Tensor) else None, where)
            base = torch.empty(0, dtype=torch.uint8).set_(storage).numpy()
        else:
            base = self._memory(number, root, where)
            if node.get("whole"):
                return base  # type: ignore[no-any-return]  # a numpy root: _memory's Any
        out = np.ndarray(tuple(node["shape"]), array_dtype(node["dtype"], where), buffer=base,
                         offset=int(node["offset"]), strides=tuple(node["strides"]))
        if fresh is not None and isinstance(fresh, np.ndarray) and fresh.shape == out.shape \
                and fresh.dtype == out.dtype and fresh.strides == out.strides \
                and fresh.__array_interface__["data"][0] == out.__array_interface__["data"][0]:
            return fresh  # the fresh view is this very view: keep the one the fresh build shares
        out.flags.writeable = bool(node["writeable"]) and base.flags.writeable
        return out

    def _tensor(self, node: dict[str, Any], fresh: Any, where: str) -> torch.Tensor:
        fresh_storage = fresh.untyped_storage() if isinstance(fresh, torch.Tensor) else None
        storage = self._memory(int(node["mem"]), fresh_storage, where)
        dtype, size, stride = torch_dtype(node["dtype"], where), tuple(node["size"]), tuple(node["stride"])
        offset = int(node["offset"])
        if isinstance(fresh, torch.Tensor) and fresh.dtype == dtype and tuple(fresh.shape) == size \
                and tuple(fresh.stride()) == stride and fresh.storage_offset() == offset \
                and fresh.untyped_storage().data_ptr() == storage.data_ptr() \
                and isinstance(fresh, torch.nn.Parameter) == bool(node["param"]):
            return fresh.requires_grad_(bool(node["grad"])) if fresh.is_leaf else fresh
        out = torch.empty(0, dtype=dtype).set_(storage, offset, size, stride)
        if node["param"]:
            return torch.nn.Parameter(out, requires_grad=bool(node["grad"]))
        return out.requires_grad_(bool(node["grad"]))


def _pair(saved: list[Any], fresh: Any) -> list[tuple[Any, Any]]:
    """Each saved item beside the fresh one at its place (None where the fresh build has none)."""
    fresh = list(fresh) if fresh is not None else []
    return [(v, fresh[k] if k < len(fresh) else None) for k, v in enumerate(saved)]
