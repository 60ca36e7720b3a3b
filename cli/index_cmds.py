"""``lakeline index create|drop|list|validate``: manage a table's indexes from a shell.

Each command is one call of ``t.indexes`` (or, for ``create --no-wait``, of the service
framework), so the CLI refuses exactly what Python refuses and adds only rendering. A
CLI process cannot keep a background build thread alive after it prints its answer, so
``--no-wait`` schedules the ``indexing`` instant and leaves the build to
``lakeline service run PATH indexing`` (or any process running the indexing service),
like Hudi's indexer in schedule mode; writers write the index from that moment on.
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.markup import escape
from rich.table import Table as RichTable

from ..indexes.entries import resolve
from ..indexes.states import IndexDef, IndexKind
from ..table import Table
from ..timeline.errors import IndexNotFoundError, InvalidIndexError
from .create_cmd import split_columns
from .options import json_option, opened_table, timeline_option
from .render import console, print_json, progress_bar, rows_table

#: Exit code of ``index validate`` when an index disagrees with the data: the command
#: worked, the table did not pass (distinct from 2, a refused command).
MISMATCH_EXIT_CODE = 1

_STATE_STYLE = {"building": "yellow", "ready": "green", "dropping": "red"}


@click.group()
def index() -> None:
    """Create, drop, list and validate a table's indexes."""


def index_dict(table: Table, d: IndexDef) -> dict[str, Any]:
    """One index as ``list --json`` prints it; ``columns`` are the covered ones (the
    kind's default spelled out), which is what people ask a listing."""
    cfg = table.config
    try:
        columns = list(resolve(d, cfg.schema, cfg.record_key).columns)
    except InvalidIndexError:
        columns = list(d.columns)  # a listing must not fail on one index it cannot resolve
    return {
        "name": d.name,
        "kind": d.kind.value,
        "columns": columns,
        "state": d.state,
        "instant": d.instant,
        "options": dict(d.options),
    }


def _styled(state: str) -> str:
    style = _STATE_STYLE.get(state, "")
    return f"[{style}]{state}[/{style}]" if style else state


def _describe(info: dict[str, Any]) -> str:
    """``name (kind on a,b)``: how one line names an index."""
    return escape(f"{info['name']} ({info['kind']} on {','.join(info['columns'])})")


@index.command("create")
@click.argument("path")
@click.argument("kind")
@click.option(
    "--columns",
    "columns",
    multiple=True,
    metavar="COLS",
    help="Indexed column(s), comma separated; default: every column (column_stats), the record key (bloom_filters).",
)
@click.option("--name", default=None, help="Index name; default: the kind.")
@click.option(
    "--fpp",
    type=float,
    default=None,
    help="False-positive rate of bloom filters (bloom_filters only), 1e-9 <= FPP < 1.",
)
@click.option(
    "--buckets",
    type=int,
    default=None,
    help="Buckets of a record_index (record_index only), 1 to 65536; default: one per 250,000 keys, at least 16.",
)
@click.option(
    "--no-wait",
    "no_wait",
    is_flag=True,
    help="Only schedule: return with the index building; `lakeline service run PATH indexing` builds it.",
)
@json_option
@timeline_option
def create(
    path: str,
    kind: str,
    columns: tuple[str, ...],
    name: str | None,
    fpp: float | None,
    buckets: int | None,
    no_wait: bool,
    as_json: bool,
    timeline_url: str | None,
) -> None:
    """Create an index of KIND on the table at PATH while writers keep writing.

    KIND: column_stats, bloom_filters or record_index.
    """
    if fpp is not None and kind != IndexKind.BLOOM_FILTERS:
        raise click.BadParameter("only bloom_filters take a false-positive rate", param_hint="--fpp")
    if buckets is not None and kind != IndexKind.RECORD_INDEX:
        raise click.BadParameter("only record_index takes a bucket count", param_hint="--buckets")
    # The range of --fpp (and the name, the columns) is checked by t.indexes.create's
    # own check (check_definition), so the CLI refuses exactly what Python refuses.
    cols = split_columns(columns) or None
    options: dict[str, object] | None = {"fpp": fpp} if fpp is not None else None
    if buckets is not None:
        options = {"buckets": buckets}
    with opened_table(path, timeline_url) as table:
        if no_wait:
            inst = table.services.schedule(
                "indexing", op="create", index=name or kind, kind=kind, columns=cols, options=options
            )
            assert inst is not None  # creating always has something to do
            found = next((d for d in table.indexes.list() if d.instant == inst.id), None)
            if found is None:  # a concurrent drop, or a builder that failed, came first
                raise IndexNotFoundError(f"index {name or kind!r} is gone: dropped or rolled back meanwhile")
            built = found
        else:
            with progress_bar(f"building {name or kind}") as progress:
                built = table.indexes.create(kind, cols, wait=True, name=name, options=options, progress=progress)
        info = index_dict(table, built)
    if as_json:
        print_json(info)
        return
    con = console()
    con.print(f"index {_describe(info)} is {_styled(info['state'])} (indexing instant {info['instant']})")
    if info["state"] == "building":
        con.print(f"build it with: lakeline service run {path} indexing", markup=False)


@index.command("drop")
@click.argument("path")
@click.argument("name")
@timeline_option
def drop(path: str, name: str, timeline_url: str | None) -> None:
    """Drop index NAME of the table at PATH: readers and writers stop using it at once,
    then its files are removed."""
    with opened_table(path, timeline_url) as table:
        table.indexes.drop(name)
    console().print(f"[green]dropped[/green] index {escape(name)}")


@index.command("list")
@click.argument("path")
@json_option
@timeline_option
def list_(path: str, as_json: bool, timeline_url: str | None) -> None:
    """List the indexes of the table at PATH (building, ready or dropping)."""
    with opened_table(path, timeline_url) as table:
        infos = [index_dict(table, d) for d in table.indexes.list()]
    if as_json:
        print_json(infos)
        return
    con = console()
    if not infos:
        con.print(f"no indexes on {escape(path)} [dim](the files index is always on)[/dim]")
        return
    view = RichTable(title=escape(f"indexes of {path}"), title_justify="left")
    for col in ("name", "kind", "columns", "state", "instant", "options"):
        view.add_column(col, overflow="fold")
    for i in infos:
        view.add_row(
            escape(i["name"]),
            i["kind"],
            escape(",".join(i["columns"])),
            _styled(i["state"]),
            str(i["instant"]),
            escape(json.dumps(i["options"])) if i["options"] else "",
        )
    con.print(view)


@index.command("validate")
@click.argument("path")
@click.argument("name", required=False)
@json_option
@timeline_option
def validate(path: str, name: str | None, as_json: bool, timeline_url: str | None) -> None:
    """Recompute the indexes (or index NAME) of the table at PATH from its data files and
    report every mismatch; exits with 1 when there is one, with 2 when a data file is
    damaged or missing (the index cannot be checked: a refused command, not a mismatch)."""
    with opened_table(path, timeline_url) as table:
        validated = [name] if name else [d.name for d in table.indexes.list() if d.is_written]
        report = table.indexes.validate(name)
    mismatches = report["mismatches"]
    if as_json:
        print_json(report | {"indexes_validated": validated})
    else:
        con = console()
        what = f"index {name}" if name else "every index"
        if not mismatches and not validated:
            # "ok" would read as "the table is sound", and nothing of it was checked.
            con.print(
                "[yellow]nothing validated[/yellow]: the table has no index. `index validate` compares "
                "indexes with the data files; it does not check the data files themselves (`lakeline table "
                "check PATH` does)"
            )
        elif not mismatches:
            con.print(f"[green]ok[/green]: {escape(what)} matches the data ({report['files_checked']} files checked)")
        else:
            con.print(rows_table(mismatches, escape(f"mismatches of {what}")))
            con.print(f"[red]{len(mismatches)} mismatches[/red] ({report['files_checked']} files checked)")
    if mismatches:
        click.get_current_context().exit(MISMATCH_EXIT_CODE)
