"""The write benchmark on an object store (``python -m bench write --store s3``).

Why: a data lake lives on object storage, and issue 27 asks what lakeline's writes and
reads cost there against deltalake's on the same server: every request is a round trip
and nothing is renamed, so the local numbers do not carry over. One SeaweedFS (``weed
mini`` on loopback, :mod:`tests.seaweedfs`) serves the whole run; every system's table
goes under a fresh ``s3://`` prefix of its bucket and gets the server's options
(deltalake's keys, which lakeline takes too). The children learn the store from
``store.json`` in the run's folder (written by the parent, readable by its user only).

*Bytes written* on the store is a listing of the table's prefix before and after a step
(objects new or with another ETag), not the local walk. pyiceberg is left out: it needs
a catalog beside the bucket (its SQL catalog is a database file), and its upsert took
74 s on local disk. The same steps run on local disk too (unless ``--no-local``), in the
same run, so peak memory on the store is compared with the same step's on disk.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.seaweedfs import SeaweedServer

STORE_FILE = "store.json"
#: Systems measured on the store (pyiceberg needs a catalog beside the bucket).
S3_SYSTEMS = ("lakeline-cow", "lakeline-mor", "deltalake")


@dataclass(frozen=True)
class StoreConfig:
    """Where a run's tables live on the store: ``base`` (``s3://bucket/prefix``) and the
    storage options every system gets."""

    base: str
    options: dict[str, str]

    def uri(self, system: str) -> str:
        return f"{self.base.rstrip('/')}/{system}"

    def save(self, workdir: Path) -> None:
        path = workdir / STORE_FILE
        path.write_text(json.dumps({"base": self.base, "options": self.options}))
        path.chmod(0o600)  # the server's (throwaway) secret

    @classmethod
    def load(cls, workdir: Path) -> StoreConfig | None:
        path = workdir / STORE_FILE
        if not path.exists():
            return None
        raw = json.loads(path.read_text())
        return cls(raw["base"], dict(raw["options"]))

    @staticmethod
    def forget(workdir: Path) -> None:
        """Tables of this run go to local disk, whatever an earlier run left there."""
        (workdir / STORE_FILE).unlink(missing_ok=True)

    @classmethod
    def on(cls, server: SeaweedServer) -> StoreConfig:
        """A fresh prefix of ``server``'s bucket, with its options."""
        return cls(f"s3://{server.bucket}/write-bench-{uuid.uuid4().hex[:10]}", server.options())


def start_server() -> SeaweedServer:
    """One SeaweedFS for the run (the tests' throwaway server; stop it when done)."""
    from tests.seaweedfs import start_seaweedfs

    return start_seaweedfs(bucket="bench")


def server_version() -> str:
    """``weed version``'s number, for the section's machine line."""
    import subprocess

    from tests.seaweedfs import weed_binary

    weed = weed_binary()
    if weed is None:
        return "?"
    try:
        out = subprocess.run([weed, "version"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    m = re.match(r"version \S+ (\S+)", out)  # "version 8000GB 4.48 pypi linux amd64"
    return m.group(1) if m else "?"


def obstore_client(bucket: str, options: Mapping[str, str]) -> Any:
    """An obstore client of ``bucket`` from deltalake-style options (the keys the
    benchmark sets; absent ones come from the environment as obstore reads it)."""
    from obstore.store import S3Store

    opts = {k.upper(): v for k, v in options.items()}
    kwargs: dict[str, Any] = {}
    for key, arg in (
        ("AWS_ENDPOINT_URL", "endpoint"),
        ("AWS_ACCESS_KEY_ID", "access_key_id"),
        ("AWS_SECRET_ACCESS_KEY", "secret_access_key"),
        ("AWS_REGION", "region"),
    ):
        if key in opts:
            kwargs[arg] = opts[key]
    if opts.get("AWS_SKIP_SIGNATURE", "").lower() == "true":
        kwargs["skip_signature"] = True
    allow_http = opts.get("AWS_ALLOW_HTTP", "").lower() == "true"
    return S3Store(bucket, client_options={"allow_http": allow_http}, **kwargs)


def split_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` -> (``bucket``, ``a/b``)."""
    rest = uri.split("://", 1)[1]
    bucket, _, prefix = rest.partition("/")
    return bucket, prefix.rstrip("/")


def list_objects(uri: str, options: Mapping[str, str]) -> dict[str, tuple[int, str]]:
    """key -> (size, ETag) of every object under the table's prefix."""
    import obstore

    bucket, prefix = split_uri(uri)
    client = obstore_client(bucket, options)
    out: dict[str, tuple[int, str]] = {}
    for chunk in obstore.list(client, prefix=f"{prefix}/"):
        for meta in chunk:
            out[meta["path"]] = (int(meta["size"]), str(meta.get("e_tag") or meta["last_modified"]))
    return out


def snapshot(path: Path | str, options: Mapping[str, str] | None) -> dict[str, tuple[int, ...]]:
    """What is under a table now, to diff after a step: the local walk (size, mtime,
    inode) of a folder, or the listing (size, ETag) of an object-store prefix."""
    if options is not None:
        return {k: (size, hash(tag)) for k, (size, tag) in list_objects(str(path), options).items()}
    from .child import _files  # the local walk the local benchmark diffs with

    return dict(_files(Path(path)))


def probe_seconds() -> float | None:
    """How long lakeline's conformance probe took in this process (it runs once per
    process and store, before a table's first event: inside a timed ``create``)."""
    try:
        from lakeline.timeline.storage import probe
    except ImportError:
        return None
    reports = list(probe._VERDICTS.values())
    return sum(r.seconds for r in reports) if reports else None


def prime_store_verdict(config: StoreConfig, workdir: Path) -> float:
    """Run lakeline's conformance probe of the run's store in this process, with the
    remembered verdicts in ``workdir`` (``LAKELINE_CACHE_DIR``, which the children
    inherit; the caller restores the variable after the run), and return how long it
    took (0 when this process had probed the store already). A user pays it once per bucket and machine a
    day; the children then create their tables as any later table on the bucket is."""
    import os

    from lakeline.timeline.storage.filesystem import Storage
    from lakeline.timeline.storage.probe import remember, require_safe

    os.environ["LAKELINE_CACHE_DIR"] = str(workdir / "verdicts")
    storage = Storage.for_uri(config.base, config.options)
    assert storage.objects is not None
    report = require_safe(storage.objects, storage.base)
    remember(storage.objects, report)  # also when this process knew the verdict already
    return report.seconds


def local_workdir(workdir: Path) -> Path:
    """A sibling run folder for the same steps on local disk: the same inputs and spec,
    no ``store.json``, its own tables."""
    local = workdir / "local"
    local.mkdir(exist_ok=True)
    if not (local / "input").exists():
        (local / "input").symlink_to(workdir / "input", target_is_directory=True)
    (local / "spec.json").write_text((workdir / "spec.json").read_text())
    return local


__all__ = [
    "S3_SYSTEMS",
    "StoreConfig",
    "list_objects",
    "local_workdir",
    "obstore_client",
    "prime_store_verdict",
    "probe_seconds",
    "snapshot",
    "start_server",
]
