"""Bad object-store locations and options, and a refused upload (audit 2026-12-07, D1-D5).

Each was an untyped error (obstore's ``ValueError``, a Rust ``PanicException``, a bare
``OSError``) or a misleading one; each is now a typed :class:`LakelineError` that names
the cause, raised before anything is written (or, for the upload, after the write was
rolled back with the committed rows intact). All against the real SeaweedFS server.
"""

from __future__ import annotations

import uuid

import pyarrow.fs as pafs
import pytest
from lakeline.table import Table
from lakeline.timeline.errors import CorruptFileError, StorageAccessError, StorageConfigError, UnsafeLocationError
from lakeline.timeline.storage.filesystem import Storage
from lakeline.timeline.storage.probe import remember, require_safe

from tests.object_storage.proxy import FaultProxy
from tests.object_storage.s3_tables import SCHEMA, rows
from tests.seaweedfs import SeaweedServer


def create(uri: str, options: dict[str, str]) -> Table:
    return Table.create(uri, SCHEMA, record_key="id", ordering_field="ts", storage_options=options)


def keys_under(s3: SeaweedServer, folder: str) -> list[str]:
    st = Storage.for_uri(f"s3://{s3.bucket}/{folder}", s3.options())
    assert st.objects is not None
    return [o.path for o in st.objects.list(st.base)]


def new_bucket(s3: SeaweedServer) -> str:
    """An empty bucket of its own (pyarrow's S3 client makes one; obstore cannot)."""
    name = f"root-{uuid.uuid4().hex[:10]}"
    fs = pafs.S3FileSystem(
        access_key=s3.access_key, secret_key=s3.secret_key, endpoint_override=s3.endpoint, scheme="http",
        region="us-east-1", allow_bucket_creation=True,
    )  # fmt: skip
    fs.create_dir(name)
    # The conformance probe's races take seconds; this bucket is on the server whose
    # shared bucket the session probed already, and a verdict is the server's.
    shared, fresh = Storage.for_uri(s3.uri(), s3.options()), Storage.for_uri(f"s3://{name}", s3.options())
    assert shared.objects is not None and fresh.objects is not None
    remember(fresh.objects, require_safe(shared.objects, shared.base))
    return name


def test_a_table_lives_at_the_root_of_an_empty_bucket(s3: SeaweedServer) -> None:
    """D1: ``s3://bucket`` said "'bucket/' is not in bucket 'bucket'"; the bucket's root
    is a folder like any other, so an empty bucket holds a table."""
    bucket = new_bucket(s3)
    t = create(f"s3://{bucket}", s3.options())
    t.upsert(rows(0, 3))
    t.upsert(rows(2, 5, ts=2))
    again = Table.open(f"s3://{bucket}/", storage_options=s3.options())
    assert sorted(again.to_arrow().column("id").to_pylist()) == [f"k{i:07d}" for i in range(5)]


def test_a_non_empty_bucket_root_is_refused_for_what_it_is(s3: SeaweedServer) -> None:
    folder = uuid.uuid4().hex[:12]
    create(f"s3://{s3.bucket}/{folder}/t", s3.options())  # the shared bucket holds something
    with pytest.raises(UnsafeLocationError, match="the folder is not empty") as e:
        create(f"s3://{s3.bucket}", s3.options())
    assert "is not in bucket" not in str(e.value)


@pytest.mark.parametrize("tail", ["a/../b", "c/./d//e", "..", "x/.", "p//q", "tab\there"])
def test_dot_segments_and_doubled_slashes_are_refused_before_any_write(s3: SeaweedServer, tail: str) -> None:
    """D2: obstore refused these with a bare ``ValueError``; keys are literal, so
    lakeline refuses them rather than resolve a second spelling of one table."""
    folder = uuid.uuid4().hex[:12]
    with pytest.raises(StorageConfigError, match="not allowed in an object-store location|control character"):
        create(f"s3://{s3.bucket}/{folder}/{tail}", s3.options())
    assert keys_under(s3, folder) == []
    with pytest.raises(StorageConfigError):
        Table.open(f"s3://{s3.bucket}/{folder}/{tail}", storage_options=s3.options())


def test_a_trailing_slash_still_names_the_same_table(s3: SeaweedServer) -> None:
    uri = s3.uri()
    create(uri + "/", s3.options()).upsert(rows(0, 2))
    assert Table.open(uri, storage_options=s3.options()).to_arrow().num_rows == 2


@pytest.mark.parametrize("bucket", ["Bad_Bucket!", "UPPER", "ab", "-lead", "a" * 64])
def test_an_invalid_bucket_name_is_a_config_error_not_a_permission_error(s3: SeaweedServer, bucket: str) -> None:
    """D3: the store answers a malformed bucket name with 403, which read as "the store
    refused the credentials"."""
    with pytest.raises(StorageConfigError, match="not a valid S3 bucket name"):
        create(f"s3://{bucket}/x", s3.options())


@pytest.mark.parametrize(
    "endpoint", ["not a url", "http://127.0.0.1:99999", "http://127.0.0.1:port", "ftp://127.0.0.1:9", "http://:9000"]
)
def test_a_malformed_endpoint_is_a_config_error_not_a_panic(s3: SeaweedServer, endpoint: str) -> None:
    """D4: obstore panicked on these at the first request (``PanicException``, a
    ``BaseException`` that ``except Exception`` lets through)."""
    folder = uuid.uuid4().hex[:12]
    with pytest.raises(StorageConfigError, match="AWS_ENDPOINT_URL"):
        create(f"s3://{s3.bucket}/{folder}/t", s3.options(AWS_ENDPOINT_URL=endpoint))
    assert keys_under(s3, folder) == []


def test_a_data_file_upload_that_never_gets_an_answer_is_a_storage_error(s3: SeaweedServer) -> None:
    """D5: a data file whose PUT the store (or the network) closes every time raised
    ``OSError: Generic S3 error``; it is a StorageAccessError, the write is rolled back
    and the committed rows stay."""
    uri = s3.uri()
    create(uri, s3.options()).upsert(rows(0, 3))
    proxy = FaultProxy(s3.endpoint, lose_response=lambda method, path: method == "PUT" and ".parquet" in path)
    try:
        t = Table.open(uri, storage_options=s3.options(AWS_ENDPOINT_URL=proxy.endpoint, TIMEOUT="2s"))
        with pytest.raises(StorageAccessError):
            t.upsert(rows(10, 13))
    finally:
        proxy.stop()
    assert proxy.counts["lost"] > 0
    assert Table.open(uri, storage_options=s3.options()).to_arrow().num_rows == 3


def test_a_data_file_read_that_never_gets_an_answer_is_a_storage_error_not_damage(s3: SeaweedServer) -> None:
    """A read of a data file whose GETs the network drops every time is the store's
    failure (``StorageAccessError``), never reported as a damaged file: the file is
    whole, and the same read through the store directly returns every row."""
    uri = s3.uri()
    create(uri, s3.options()).upsert(rows(0, 3))
    proxy = FaultProxy(s3.endpoint, lose_response=lambda method, path: method == "GET" and ".parquet" in path)
    try:
        t = Table.open(uri, storage_options=s3.options(AWS_ENDPOINT_URL=proxy.endpoint, TIMEOUT="2s"))
        with pytest.raises(StorageAccessError) as caught:
            t.to_arrow()
        assert not isinstance(caught.value, CorruptFileError), caught.value
    finally:
        proxy.stop()
    assert proxy.counts["lost"] > 0
    assert Table.open(uri, storage_options=s3.options()).to_arrow().num_rows == 3
