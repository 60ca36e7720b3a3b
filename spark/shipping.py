"""Task payloads for executors with no storage credentials in the part PySpark may put on disk.

Why: executors open a table's object store themselves, from the pickled
:class:`~lakeline.timeline.storage.object_store.ObjectStore` a task carries, and that
pickle holds the storage options, the secret key included (the client is rebuilt from
them; nothing else reaches an executor). PySpark writes some of what it ships to files:
a parallelized collection goes to the JVM through a temporary file on the driver's disk,
and so does a broadcast, which executors then keep on their disks too, and a function
whose pickle passes ``spark.broadcast.UDFCompressionThreshold`` (1 MiB) is broadcast
(all three only when ``spark.io.encryption.enabled`` is off, the default). Only a
function's pickle below that threshold travels in memory (Py4J, the task, a socket).

So the payload is pickled with every ``ObjectStore`` replaced by a reference
(:func:`pack`), and the stores themselves (a few hundred bytes each) travel in the
function's closure, where :func:`unpack` puts them back on the executor. The payload
may then go through any file, broadcast or collection: it holds no credential.
Equal stores become one object again, so the items of one task share one client per
thread instead of building one each.
"""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass, field
from typing import Any

from pyspark import Broadcast, SparkContext

from ..timeline.storage.object_store import ObjectStore

#: A payload up to this size travels inside the function's pickle (in memory); a larger
#: one is broadcast, which keeps the function's pickle below PySpark's 1 MiB threshold.
INLINE_BYTES = 256 * 1024


class _Pickler(pickle.Pickler):
    def __init__(self, out: io.BytesIO, stores: list[ObjectStore]) -> None:
        super().__init__(out, protocol=pickle.HIGHEST_PROTOCOL)
        self.stores = stores

    def persistent_id(self, obj: Any) -> Any:
        if not isinstance(obj, ObjectStore):
            return None
        for i, known in enumerate(self.stores):
            if known is obj or known == obj:
                return ("lakeline.store", i)
        self.stores.append(obj)
        return ("lakeline.store", len(self.stores) - 1)


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: io.BytesIO, stores: tuple[ObjectStore, ...]) -> None:
        super().__init__(data)
        self.stores = stores

    def persistent_load(self, pid: Any) -> Any:
        kind, i = pid
        if kind != "lakeline.store":
            raise pickle.UnpicklingError(f"unknown persistent id {kind!r}")
        return self.stores[i]


@dataclass
class Packer:
    """Pickles payloads without their object stores; :attr:`stores` collects those met."""

    stores: list[ObjectStore] = field(default_factory=list)

    def dumps(self, obj: Any) -> bytes:
        out = io.BytesIO()
        _Pickler(out, self.stores).dump(obj)
        return out.getvalue()


def pack(obj: Any) -> tuple[bytes, tuple[ObjectStore, ...]]:
    """``obj`` pickled without its object stores, and those stores (in reference order)."""
    packer = Packer()
    blob = packer.dumps(obj)
    return blob, tuple(packer.stores)


def unpack(blob: bytes, stores: tuple[ObjectStore, ...]) -> Any:
    """The object :func:`pack` pickled, with ``stores`` back in it."""
    return _Unpickler(io.BytesIO(blob), stores).load()


class Shipped:
    """A value for a Spark function's closure: its credential-free pickle inline when
    small, else broadcast, and its stores in the closure itself. :meth:`value` (on the
    executor) unpickles it once per task."""

    def __init__(self, sc: SparkContext, value: Any) -> None:
        blob, self.stores = pack(value)
        self.blob: bytes | None = blob if len(blob) <= INLINE_BYTES else None
        self.broadcast: Broadcast[bytes] | None = sc.broadcast(blob) if self.blob is None else None
        self._value: Any = None
        self._loaded = False

    def value(self) -> Any:
        if not self._loaded:
            blob = self.blob if self.blob is not None else self.broadcast.value  # type: ignore[union-attr]
            self._value, self._loaded = unpack(blob, self.stores), True
        return self._value

    def __getstate__(self) -> dict[str, Any]:
        return {"blob": self.blob, "broadcast": self.broadcast, "stores": self.stores}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.blob, self.broadcast, self.stores = state["blob"], state["broadcast"], state["stores"]
        self._value, self._loaded = None, False
