"""Worker processes and an object store (issue 45): obstore's runtime does not survive a
fork, so a child forked after its parent reached S3 used to hang on its first request.

What must hold: ``LocalEngine(processes=True)`` reaches the store from its workers (they
start from a fresh server process, never forked from the parent), and a process forked
from one that used the store is refused it at once with a typed error saying how to
start workers, instead of waiting forever.
"""

from __future__ import annotations

import os
import pickle

import pyarrow as pa
import pytest
from lakeline.table import Table
from lakeline.table.engine import LocalEngine
from lakeline.timeline.errors import ForkedStoreError, LakelineError

from tests.children.store_fork_child import count_rows
from tests.helpers import forked_status
from tests.seaweedfs import SeaweedServer

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])


def _table(s3: SeaweedServer, uri: str) -> Table:
    t = Table.create(uri, SCHEMA, record_key="id", storage_options=s3.options())
    t.upsert(pa.table({"id": [1, 2, 3], "v": [1, 2, 3]}, schema=SCHEMA))
    return t


@pytest.mark.timeout(120)
def test_process_workers_reach_the_store_after_their_parent_did(s3: SeaweedServer) -> None:
    uri = s3.uri("forked-workers")  # a fresh folder each call
    assert _table(s3, uri).to_arrow().num_rows == 3  # the parent's obstore runtime is running
    engine = LocalEngine(parallelism=2, processes=True)
    assert engine.map(count_rows, [(uri, s3.options())] * 2) == [3, 3]


def test_a_process_forked_after_the_store_was_used_is_refused_it_typed(s3: SeaweedServer) -> None:
    uri = s3.uri("forked-child")
    _table(s3, uri).to_arrow()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        outcome: tuple[str, str] = ("none", "")
        try:
            Table.open(uri, storage_options=s3.options()).to_arrow()
            outcome = ("read", "")
        except ForkedStoreError as e:
            outcome = ("refused", str(e))
        except LakelineError as e:  # wrapped: the cause must be the refusal
            outcome = (type(e.__cause__ or e.__context__).__name__, str(e))
        finally:
            os.write(w, pickle.dumps(outcome))
            os._exit(0)
    os.close(w)
    assert forked_status(pid, "its first request to the store", timeout=20) == 0
    kind, message = pickle.loads(os.read(r, 65536))
    assert kind in ("refused", "ForkedStoreError"), (kind, message)
    assert "spawn" in message and "forkserver" in message
    assert Table.open(uri, storage_options=s3.options()).to_arrow().num_rows == 3  # the parent still does
