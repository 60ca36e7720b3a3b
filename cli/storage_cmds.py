"""``lakeline storage probe URI [--json]``: check an object store before a table trusts it.

A table on an object store keeps its event log there only if the store's conditional
puts are atomic (docs/object-storage.md); ``Table.create`` runs the same probe and
refuses an unsafe store with ``UnsafeStorageError``. This command shows each check, so
an operator can try a store (or a proxy in front of one) before creating anything. The
store's options come from the environment (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``,
...) and from ``--option KEY=VALUE``; secrets belong in the environment, not on a
command line. Exit code 1 when the store is unsafe, 2 when it cannot be reached.
"""

from __future__ import annotations

import click

from ..timeline.errors import StorageConfigError
from ..timeline.storage.filesystem import Storage
from ..timeline.storage.probe import probe as run_probe
from ..timeline.storage.probe import remember
from .options import json_option
from .render import console, print_json, rows_table


@click.group()
def storage() -> None:
    """Object stores: check that one can hold a table's event log."""


def _options(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise StorageConfigError(f"--option takes KEY=VALUE, not {key!r}")
        out[key] = value
    return out


@storage.command("probe")
@click.argument("uri")
@click.option("--option", "-o", "pairs", multiple=True, metavar="KEY=VALUE", help="A storage option (repeatable).")
@json_option
def probe(uri: str, pairs: tuple[str, ...], as_json: bool) -> None:
    """Race create-only writers on one key and try a stale ETag under URI (s3://bucket/prefix)."""
    st = Storage.for_uri(uri, _options(pairs))
    if st.objects is None:
        raise StorageConfigError(f"{uri} is not an object-store location (s3://, gs://, az://)")
    report = run_probe(st.objects, st.base)
    remember(st.objects, report)  # the next table on this bucket need not probe again
    if as_json:
        print_json(report.to_dict())
    else:
        rows = [{"check": c.name, "holds": "yes" if c.ok else "NO", "seen": c.detail} for c in report.checks]
        console().print(rows_table(rows, title=f"{report.location} at {report.endpoint}"))
        verdict = "safe: it can hold an event log" if report.safe else "UNSAFE: keep the timeline in PostgreSQL"
        console().print(f"{verdict} ({report.requests} requests, {report.seconds:.2f}s)")
    if not report.safe:
        raise SystemExit(1)
