"""The live objects of a local run as bytes, and back: what an exact resume restores on the local
runtime (workers with their envs mid-episode, their replay, RNGs and networks)::

    data = dumps({"workers": workers}, shared={"server": server, "shard0": shard})
    state = loads(data, shared={"server": new_server, "shard0": new_shard})

``shared`` names objects that are not saved but referred to: the parameter server and its shards
(the checkpoint's arrays restore them), which the objects read back are joined to. Locks are saved
as fresh locks. A numpy view stays a view of its array; tensors are saved as numpy arrays of
their storage, so parameters that are views of one flat buffer (:class:`~gorila.nets.FlatParams`)
are views of one buffer again; a torch ``Generator`` is saved as its state.

Reading uses pickle restricted to the classes and functions defined in gorila, Gymnasium,
``numpy.random`` and ``torch.nn``'s modules, and a few named ones (containers, numpy's and torch's
array types): a snapshot that names other code (``os.system``, ``builtins.eval``) is refused
(:class:`~gorila.errors.CheckpointError`). That is a fence, not a sandbox: the objects read back
hold gorila callables (an env factory) that the run calls, so a run directory whose checkpoint
holds a snapshot is to be trusted as its code is. Snapshots ride inside checksummed checkpoints,
whose sidecars are checksummed too, and are read only by ``--resume`` on the local runtime.
"""

from __future__ import annotations

import copyreg
import io
import pickle
import threading
from typing import Any

import numpy as np
import torch

from gorila.errors import CheckpointError

_LOCKS = (type(threading.Lock()), type(threading.RLock()))
#: Modules whose every name a snapshot may refer to (and their submodules).
_TRUSTED_PACKAGES = ("gorila.", "gymnasium.", "torch.nn.modules.", "numpy.random.")
#: Single names elsewhere a snapshot may refer to.
_TRUSTED_NAMES = {
    "builtins": {"set", "frozenset", "slice", "range", "complex", "bytearray", "object", "dict", "list", "tuple",
                 "int", "float", "bool", "str", "bytes"},
    "collections": {"OrderedDict", "deque", "Counter", "defaultdict"},
    "copyreg": {"_reconstructor"},
    "functools": {"partial"},
    "pathlib": {"PosixPath", "WindowsPath", "PurePosixPath", "PureWindowsPath"},  # where a replay shard saves
    "time": {"perf_counter", "monotonic"},  # an evaluator's clock
    "numpy": {"dtype", "ndarray", "float32", "float64", "int64", "int32", "uint8", "bool_"},
    "numpy.core.multiarray": {"_reconstruct", "scalar"},
    "numpy._core.multiarray": {"_reconstruct", "scalar"},
    "numpy.core.numeric": {"_frombuffer"},
    "numpy._core.numeric": {"_frombuffer"},
    "numpy.dtypes": {"Float32DType", "Float64DType", "Int64DType", "Int32DType", "UInt8DType", "BoolDType"},
    "torch": {"float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
              "device", "Size"},
    "torch._utils": {"_rebuild_parameter"},
}


class _Storage:
    """One tensor storage, saved once however many tensors view it."""

    def __init__(self, tensor: torch.Tensor):
        storage = tensor.untyped_storage()
        self.data = torch.empty(0, dtype=torch.uint8).set_(storage).numpy().copy()

    def __reduce__(self) -> tuple:
        return _storage, (self.data,)


def _storage(data: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(data.copy())


def _tensor(base: torch.Tensor, dtype: torch.dtype, offset: int, size: tuple[int, ...], stride: tuple[int, ...],
            requires_grad: bool) -> torch.Tensor:
    out = torch.empty(0, dtype=dtype).set_(base.untyped_storage(), offset, size, stride)
    return out.requires_grad_(requires_grad)


def _view(root: np.ndarray, offset: int, shape: tuple[int, ...], strides: tuple[int, ...],
          dtype: np.dtype) -> np.ndarray:
    return np.ndarray(shape, dtype, buffer=root, offset=offset, strides=strides)


def _generator(state: np.ndarray) -> torch.Generator:
    generator = torch.Generator()
    generator.set_state(torch.from_numpy(state.copy()))
    return generator


def _lock() -> Any:
    return threading.Lock()


class _Pickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, shared: dict[str, Any]):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.shared = {id(obj): name for name, obj in shared.items()}
        self.storages: dict[int, _Storage] = {}  # by the storage's address: views share one
        self.dispatch_table = copyreg.dispatch_table.copy()
        self.dispatch_table[torch.Tensor] = self._reduce_tensor
        self.dispatch_table[torch.Generator] = lambda g: (_generator, (g.get_state().numpy().copy(),))
        for lock in _LOCKS:
            self.dispatch_table[lock] = lambda _: (_lock, ())

    def persistent_id(self, obj: Any) -> str | None:
        return self.shared.get(id(obj))

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, threading.Thread):  # it would come back as a thread object that never runs
            raise pickle.PicklingError(f"a thread ({obj.name}) cannot be saved")
        # A view (a client's per-shard slices of its flat copy) stays a view of the same array:
        # pickle would copy each view on its own, and writes through one would no longer show in the other.
        if type(obj) is not np.ndarray or not isinstance(obj.base, np.ndarray):
            return NotImplemented
        root = obj.base
        while isinstance(root.base, np.ndarray):
            root = root.base
        if not root.flags.c_contiguous:
            return NotImplemented
        offset = obj.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        return _view, (root, offset, obj.shape, obj.strides, obj.dtype)

    def _reduce_tensor(self, tensor: torch.Tensor) -> tuple:
        if tensor.device.type != "cpu":
            raise pickle.PicklingError("a tensor off the CPU: snapshots keep the local runtime's CPU state only")
        key = tensor.untyped_storage().data_ptr()
        storage = self.storages.setdefault(key, _Storage(tensor))
        return _tensor, (storage, tensor.dtype, tensor.storage_offset(), tuple(tensor.shape), tuple(tensor.stride()),
                         tensor.requires_grad)


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, shared: dict[str, Any]):
        super().__init__(file)
        self.shared = shared

    def persistent_load(self, pid: Any) -> Any:
        if pid not in self.shared:
            raise CheckpointError(f"the snapshot refers to {pid!r}, which this run does not have")
        return self.shared[pid]

    def find_class(self, module: str, name: str) -> Any:
        refused = CheckpointError(f"the snapshot refers to {module}.{name}, which a snapshot may not name")
        if "." in name:  # pickle would walk attributes: gorila.atomic.os.system
            raise refused
        if name in _TRUSTED_NAMES.get(module, ()):
            return super().find_class(module, name)
        if module == "numpy" and isinstance(getattr(np, name, None), np.ufunc):  # a sum tree's np.add
            return getattr(np, name)
        if module == __name__ or (module + ".").startswith(_TRUSTED_PACKAGES):
            found = super().find_class(module, name)
            # defined there, not imported there (gorila.envs.vector's functools, a module's os)
            if getattr(found, "__module__", None) == module:
                return found
        raise refused


def dumps(obj: Any, shared: dict[str, Any]) -> bytes:
    """``obj`` as bytes; the objects in ``shared`` are referred to by name, not saved. Raises
    ``pickle.PicklingError`` or ``TypeError`` for what cannot be saved (a thread, a socket)."""
    out = io.BytesIO()
    _Pickler(out, shared).dump(obj)
    return out.getvalue()


def loads(data: bytes, shared: dict[str, Any]) -> Any:
    """What :func:`dumps` saved, joined to ``shared`` (the same names, this run's objects)."""
    try:
        return _Unpickler(io.BytesIO(data), shared).load()
    except CheckpointError:
        raise
    except Exception as err:  # a snapshot of another gorila version, or damaged before it was checksummed
        raise CheckpointError(f"the workers' snapshot cannot be read: {type(err).__name__}: {err}") from err
