"""The conformance probe: does this object store really put conditionally?

The event log on an object store is only as safe as the store's create-only put: if
two racing writers can both "create" one key, two commits win one slot and one of them
is lost. S3 look-alikes have shipped conditional puts that check and then act without
a lock (SeaweedFS #8800, RustFS #1659, versitygw #2288), and a proxy in front of a
store may drop the headers; no table format checks the store it trusts. Before a store
first holds an event log, lakeline does (:func:`require_safe`), and refuses an unsafe
one with :class:`~..errors.UnsafeStorageError` naming the way out (a PostgreSQL
timeline). ``lakeline storage probe URI [--json]`` runs it on demand.

The checks, on objects under ``<location>/.lakeline-probe/<token>/`` (removed after):
the bucket answers (a GET of a missing key is "not found", not "no such bucket");
a create-only put of an existing key is refused; :data:`ROUNDS` races of
:data:`WRITERS` threads (one client each, so real concurrent requests) creating one key
have exactly one winner, whose bytes the key holds; and a put naming a stale ETag is
refused while one naming the current ETag lands.

A safe verdict is remembered per (endpoint, bucket): in the process, and for
:data:`VERDICT_TTL_S` in a file of the user's cache folder (``$LAKELINE_CACHE_DIR``, else
``$XDG_CACHE_HOME/lakeline``, else ``~/.cache/lakeline``). The races are slow on purpose
(a store that holds contended creates holds them for a second or more, SeaweedFS does);
``lakeline storage probe`` always checks again. An unsafe verdict is never remembered:
a fixed store is trusted as soon as it passes. The file names no credential (endpoint
and bucket only).

A remembered verdict is not what a write trusts, though: a proxy or load balancer put
in front of an existing table's endpoint, or a server swapped behind it, may stop
honouring the headers at any time, and then event puts overwrite each other's slots
(issue 45, D7). So every process checks the store's conditional puts again where it
first writes to a table (:func:`check_conditional_puts`, once per process and endpoint):
a create-only put of an existing key and a put naming a wrong ETag must both be
refused. Four small requests, no race (the races test a store's implementation, the
remembered part; the headers reaching it is what changes with the network). A failed
check raises :class:`UnsafeStorageError` before the write puts anything, and drops the
remembered safe verdict, so the next ``Table.create`` probes in full.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import LakelineError, ObjectChangedError, UnsafeStorageError
from .object_store import ObjectStore

#: Racing writers per round, and rounds.
WRITERS = 8
ROUNDS = 3
#: How long this machine trusts a safe verdict without probing again.
VERDICT_TTL_S = 24 * 3600.0
VERDICT_FILE = "store-verdicts.json"
_VERDICTS: dict[tuple[str, str, str], ProbeReport] = {}
_LOCK = threading.Lock()
#: The (pid, kind, endpoint, bucket) whose conditional puts this process checked: the
#: pid makes a forked child check again (its parent's answer is not its network's).
_CHECKED: set[tuple[int, str, str, str]] = set()
_CHECK_LOCK = threading.Lock()
#: Requests :func:`check_conditional_puts` makes when it checks.
CHECK_REQUESTS = 4
log = logging.getLogger(__name__)


def _fresh_lock_in_child() -> None:
    # A thread of the parent may hold the lock at the fork; the child has no such thread.
    global _CHECK_LOCK
    _CHECK_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_fresh_lock_in_child)


@dataclass(frozen=True)
class ProbeCheck:
    """One check of the probe and what it saw."""

    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class ProbeReport:
    """What the probe found on a store: safe when every check held."""

    location: str
    endpoint: str
    checks: tuple[ProbeCheck, ...]
    seconds: float
    requests: int = field(default=0)

    @property
    def safe(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"safe": self.safe}


def _race(objects: ObjectStore, key: str, pool: ThreadPoolExecutor) -> tuple[int, bool]:
    """(winners, whether the key holds the winner's bytes) of one round: each writer with
    a client of its own (its own connections), as separate processes would be."""
    start = threading.Barrier(WRITERS)
    writers = [copy.copy(objects) for _ in range(WRITERS)]

    def create(i: int) -> bool:
        _ = writers[i].client  # built before the race starts
        start.wait()
        try:
            writers[i].create(key, f"writer-{i}".encode())
            return True
        except FileExistsError:
            return False

    won = list(pool.map(create, range(WRITERS)))
    winners = [i for i, w in enumerate(won) if w]
    held = objects.get(key)
    return len(winners), len(winners) == 1 and held == f"writer-{winners[0]}".encode()


def probe(objects: ObjectStore, base: str) -> ProbeReport:
    """Run every check against ``objects`` under ``base`` (``bucket/prefix``).

    Raises:
        StorageAccessError: the store cannot be reached, refuses the credentials, or the
            bucket does not exist (a typed subclass names which).
    """
    t0 = time.monotonic()
    folder = f"{base.rstrip('/')}/.lakeline-probe/{uuid.uuid4().hex}"
    checks: list[ProbeCheck] = []
    requests = 0
    try:
        try:
            objects.get(f"{folder}/absent")  # a missing bucket raises BucketNotFoundError here
        except FileNotFoundError:
            pass
        requests += 1
        first = f"{folder}/once"
        objects.create(first, b"first")
        try:
            objects.create(first, b"second")
            refused = False
        except FileExistsError:
            refused = objects.get(first) == b"first"
        requests += 4
        checks.append(ProbeCheck("create-only put of an existing key is refused", refused, "409/412 expected"))

        with ThreadPoolExecutor(WRITERS, thread_name_prefix="lakeline-store-probe") as pool:
            rounds = [_race(objects, f"{folder}/race-{r}", pool) for r in range(ROUNDS)]
        requests += ROUNDS * (WRITERS + 1)
        counts = [n for n, _ in rounds]
        checks.append(
            ProbeCheck(
                f"{ROUNDS} races of {WRITERS} create-only writers on one key have one winner each",
                all(n == 1 for n in counts) and all(ok for _, ok in rounds),
                f"winners per round: {counts}",
            )
        )

        key = f"{folder}/cas"
        stale = objects.put(key, b"v1")
        current = objects.replace(key, b"v2", stale)
        try:
            objects.replace(key, b"v3", stale)
            stale_refused = False
        except ObjectChangedError:
            stale_refused = True
        try:
            objects.replace(key, b"v4", current)
            current_lands = objects.get(key) == b"v4"
        except ObjectChangedError:
            current_lands = False
        requests += 5
        checks.append(ProbeCheck("a put naming a stale ETag is refused", stale_refused, "412 expected"))
        checks.append(ProbeCheck("a put naming the current ETag lands", current_lands, "200 expected"))
    finally:
        for name in ["once", "cas"] + [f"race-{r}" for r in range(ROUNDS)]:
            try:
                objects.delete(f"{folder}/{name}")
            except Exception:  # noqa: BLE001,S110 - best effort: the probe's verdict stands
                pass
    location = f"{objects.location.scheme}://{base}"
    return ProbeReport(location, objects.endpoint, tuple(checks), round(time.monotonic() - t0, 3), requests)


def conditional_checks(objects: ObjectStore, base: str) -> tuple[ProbeCheck, ...]:
    """The cheap part of the probe: does a conditional put still reach the store and
    hold? :data:`CHECK_REQUESTS` requests under ``<base>/.lakeline-probe/``."""
    key = f"{base.rstrip('/')}/.lakeline-probe/{uuid.uuid4().hex}/once"
    try:  # removed after, even when the first put fails (it may have landed)
        try:
            objects.create(key, b"first")
        except FileExistsError:
            # A fresh key: the put landed and its answer was lost (the client's retry
            # was refused) or replaced by a refusal. Ours if it holds our bytes.
            if objects.get(key) != b"first":
                raise UnsafeStorageError(f"the object store at {objects.endpoint} refused a new key") from None
        try:
            objects.create(key, b"second")
            refused = False
        except FileExistsError:
            refused = True
        try:
            objects.replace(key, b"third", '"lakeline-no-such-etag"')
            wrong_refused = False
        except ObjectChangedError:
            wrong_refused = True
    finally:
        try:
            objects.delete(key)
        except (OSError, LakelineError):  # best effort: the check's verdict stands
            log.debug("could not remove the conditional-put check's key %s", key)
    return (
        ProbeCheck("create-only put of an existing key is refused", refused, "409/412 expected"),
        ProbeCheck("a put naming a wrong ETag is refused", wrong_refused, "412 expected"),
    )


def check_conditional_puts(objects: ObjectStore, base: str) -> int:
    """Check, once per process and endpoint, that the store still honours conditional
    puts (see the module docstring); the requests it made (0 when already checked).

    Raises:
        UnsafeStorageError: a conditional put was not refused; nothing else was written.
        StorageAccessError: the store cannot be used at all.
    """
    key = (os.getpid(), *_key(objects))
    if key in _CHECKED:
        return 0
    with _CHECK_LOCK:
        if key in _CHECKED:
            return 0
        t0 = time.monotonic()
        checks = conditional_checks(objects, base)
        report = ProbeReport(
            f"{objects.location.scheme}://{base}", objects.endpoint, checks, round(time.monotonic() - t0, 3)
        )
        if report.safe:
            _CHECKED.add(key)
            return CHECK_REQUESTS
    remember(objects, report)  # an unsafe answer drops the remembered safe verdict
    with _LOCK:
        _VERDICTS.pop(_key(objects), None)
    raise UnsafeStorageError(
        f"the object store at {report.endpoint} (bucket {objects.location.bucket}) does not honour conditional "
        f"puts any more: {_failed(report)}. Nothing was written: with it, racing commits would overwrite each "
        "other's events. Check for a proxy or load balancer that drops If-None-Match/If-Match, or keep the "
        "timeline in PostgreSQL (timeline='postgresql://...')"
    )


def forget_check(objects: ObjectStore) -> None:
    """Check the store again before the next write of this process (after a write saw
    its event overwritten: the store stopped honouring conditional puts since)."""
    _CHECKED.discard((os.getpid(), *_key(objects)))


def _failed(report: ProbeReport) -> str:
    return "; ".join(f"{c.name}: no ({c.detail})" for c in report.checks if not c.ok)


def require_safe(objects: ObjectStore, base: str) -> ProbeReport:
    """The probe's verdict on ``objects``: remembered (see the module docstring), or run.

    Raises:
        UnsafeStorageError: a check failed; the message names it and the way out.
        StorageAccessError: the store cannot be used at all (see :func:`probe`).
    """
    key = _key(objects)
    with _LOCK:
        report = _VERDICTS.get(key)
        if report is None:
            report = _remembered(key, objects, base)
        if report is None:
            report = probe(objects, base)
            remember(objects, report)
            if report.safe:  # the full probe covers the first write's check
                _CHECKED.add((os.getpid(), *key))
        _VERDICTS[key] = report
    if not report.safe:
        raise UnsafeStorageError(
            f"the object store at {report.endpoint} (bucket {objects.location.bucket}) cannot hold an event log: "
            f"{_failed(report)}. Keep this table's timeline in PostgreSQL (timeline='postgresql://...'), "
            "or use a store whose conditional puts are atomic; `lakeline storage probe URI` shows the checks"
        )
    return report


def verdict_path() -> Path:
    """The file of remembered safe verdicts (the folder need not exist)."""
    folder = os.environ.get("LAKELINE_CACHE_DIR")
    if not folder:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        folder = os.path.join(cache, "lakeline")
    return Path(folder) / VERDICT_FILE


def _key(objects: ObjectStore) -> tuple[str, str, str]:
    return (objects.location.kind, objects.endpoint, objects.location.bucket)


def _entry(key: tuple[str, str, str]) -> str:
    return " ".join(key)


def _load() -> dict[str, Any]:
    try:
        raw = json.loads(verdict_path().read_text())
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: probe (costs time, never safety)
    return raw if isinstance(raw, dict) else {}


def _fresh(entry: object, now: float) -> bool:
    """Whether ``entry`` is a safe verdict younger than the TTL (anything else in the
    file, a hand edit or a torn write, counts as no verdict)."""
    if not isinstance(entry, dict) or entry.get("safe") is not True:
        return False
    checked = entry.get("checked_at")
    return isinstance(checked, (int, float)) and 0 <= now - checked < VERDICT_TTL_S


def _remembered(key: tuple[str, str, str], objects: ObjectStore, base: str) -> ProbeReport | None:
    entry = _load().get(_entry(key))
    if not _fresh(entry, time.time()):
        return None
    assert isinstance(entry, dict)
    checked = entry["checked_at"]
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(checked))
    check = ProbeCheck("this machine's safe verdict is less than a day old", True, f"probed {stamp}")
    return ProbeReport(f"{objects.location.scheme}://{base}", objects.endpoint, (check,), 0.0, 0)


def remember(objects: ObjectStore, report: ProbeReport) -> None:
    """Record a safe verdict on ``objects`` (and drop the entry of an unsafe one); best
    effort: a verdict that cannot be written costs the next process a probe."""
    key = _key(objects)
    path = verdict_path()
    now = time.time()
    entries = {k: v for k, v in _load().items() if _fresh(v, now)}
    if report.safe:
        entries[_entry(key)] = {"safe": True, "checked_at": now}
    elif entries.pop(_entry(key), None) is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        tmp.write_text(json.dumps(entries, indent=1, sort_keys=True))
        tmp.chmod(0o600)
        os.replace(tmp, path)  # a racing process's entry may be lost: it probes again
    except OSError as e:
        log.debug("store verdict not remembered in %s: %s", path, e)


__all__ = [
    "CHECK_REQUESTS",
    "ROUNDS",
    "VERDICT_TTL_S",
    "WRITERS",
    "ProbeCheck",
    "ProbeReport",
    "check_conditional_puts",
    "conditional_checks",
    "forget_check",
    "probe",
    "remember",
    "require_safe",
    "verdict_path",
]
