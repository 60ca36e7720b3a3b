"""The integrity check of a table (``t.check()``, ``lakeline table check PATH``).

What users of the most trusted formats run before they trust a copy, a restore or a
store: every file the table promises to read is there, whole, and readable (Iceberg's and
Delta's metadata carry each file's size for this). Here the promises are the timeline's:

* the files of the **current snapshot** and of every **retained** one, the snapshots a
  time-travel read may still open (:mod:`lakeline.timeline.retention`): every snapshot
  from the furthest retain point of a clean on (all of them when the table was never
  cleaned), from the earliest change-feed bookmark on, and the snapshots savepoints pin.
  As in the cleaner, the files of the snapshots from a point on are that snapshot's plus
  every file a data instant added after it;
* each such file must exist with the size its commit recorded (``WriteStat.bytes``), have
  a Parquet footer that reads, with the row count the commit recorded, and a log file
  must have a log's columns;
* the indexes must match the data: ``t.indexes.validate()``, whose answer the report
  carries as it is (an error it raises is one more problem, not a crash of the check).

Only sizes and footers are read (a stat and ``pyarrow.parquet.read_metadata`` per file,
on a small thread pool, through the table's :class:`Storage`: a local disk or an object
store alike), so the check costs a few requests per file, not the table's bytes. Every
problem is reported, each naming its file; a file that goes missing while the check runs
because a clean retired its snapshot meanwhile is not one (the timeline is read again).

A **deep** check (``t.check(deep=True)``, ``lakeline table check --deep``) also reads
every page of every file, a row group at a time, verifying each page's CRC
(:mod:`lakeline.timeline.storage.data_integrity`): a flipped byte that a footer read
cannot see is reported as :attr:`ProblemKind.DAMAGED_DATA`, naming the file, the row
group and the column. It reads the table's bytes once (files written before page CRCs
are decoded whole, which catches what decoding catches).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ..timeline.commit_metadata import CommitMetadata
from ..timeline.diagnostics.redact import redact
from ..timeline.errors import CorruptLogError, LakelineError
from ..timeline.retention import bookmark_seqs, furthest_retain_seq, pinned_seqs
from ..timeline.storage.data_reads import PARQUET_READ, check_log
from ..timeline.storage.filesystem import Storage
from ..timeline.timeline import Timeline
from ..timeline.view.file_group import FileKind
from .write.records import OP, SEQ

if TYPE_CHECKING:
    from .table import Table

#: Threads that stat files and read footers at once: enough to overlap an object
#: store's round trips, few enough to leave a shared machine its cores.
CHECK_THREADS = 8

#: What reading a file's size or footer may raise about the file or its store (an object
#: store's typed errors are LakelineErrors): a problem of that file, not the check's end.
_READ_ERRORS = (pa.ArrowException, OSError, LakelineError)

#: ``progress(done, total)``: files checked so far, of how many.
Progress = Callable[[int, int], None]


class ProblemKind(enum.StrEnum):
    """What is wrong with a file (or the indexes); the value is what reports print."""

    MISSING = "missing"
    UNREACHABLE = "unreachable"  # the store would not say whether it is there
    SIZE_MISMATCH = "size_mismatch"
    UNREADABLE_FOOTER = "unreadable_footer"
    ROW_COUNT_MISMATCH = "row_count_mismatch"
    NOT_A_LOG = "not_a_log"
    DAMAGED_DATA = "damaged_data"  # a page that fails its CRC or does not decode (deep check)
    INDEX_MISMATCH = "index_mismatch"
    INDEX_UNVERIFIABLE = "index_unverifiable"


@dataclass(frozen=True)
class Problem:
    """One problem: its kind, the file it is about (relative to the table, as the
    timeline names it; for an index problem the data or index file named, "" when
    none is), and what was seen. ``snapshot`` says who needs the file: ``current`` (the
    newest snapshot), ``retained`` (only an older snapshot still readable by time
    travel), or ``index``."""

    kind: ProblemKind
    path: str
    detail: str
    snapshot: str = "current"

    def line(self) -> str:
        """One line for a terminal or a log: kind, path, what was seen."""
        where = f" ({self.snapshot} snapshot)" if self.snapshot != "index" else ""
        return f"{self.kind}: {self.path or '-'}{where}: {self.detail}"


@dataclass(frozen=True)
class CheckReport:
    """The answer of :func:`check_table`.

    Attributes:
        files_checked: data files checked (each once, however many snapshots name it).
        bytes_checked: the sizes their commits recorded, summed.
        snapshot_seq: the event the current snapshot ends at.
        retained_from: the first snapshot (event) of the retained range, -1 when every
            snapshot is (the table was never cleaned).
        savepoints: the snapshots (events) savepoints pin besides.
        problems: every problem found, by path.
        indexes: what ``t.indexes.validate()`` returned (None when it raised or was not run).
    """

    files_checked: int
    bytes_checked: int
    snapshot_seq: int
    retained_from: int
    savepoints: tuple[int, ...] = ()
    problems: tuple[Problem, ...] = ()
    indexes: Mapping[str, Any] | None = field(default=None, compare=False)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["problems"] = [{**asdict(p), "kind": str(p.kind)} for p in self.problems]
        out["savepoints"] = list(self.savepoints)
        out["indexes"] = json.loads(json.dumps(self.indexes, default=str)) if self.indexes is not None else None
        out["ok"] = self.ok
        return out


@dataclass(frozen=True)
class ExpectedFile:
    """A file a retained snapshot reads, as its commit described it."""

    path: str
    kind: FileKind
    rows: int
    bytes: int
    current: bool


def check_table(
    table: Table, indexes: bool = True, progress: Progress | None = None, deep: bool = False
) -> CheckReport:
    """Check the files of the current and the retained snapshots of ``table`` and, with
    ``indexes``, its indexes; with ``deep``, every page of every file too (see the
    module docstring).

    Raises:
        CorruptEventError: the timeline's own records are damaged (nothing to check against).
    """
    tl = table.log.refresh()
    start = _retained_from(tl)
    pins = tuple(pinned_seqs(tl))
    expected = expected_files(table, tl, start, pins)
    found = _inspect_all(table.storage, list(expected.values()), progress, deep)
    if found:
        found = _still_needed(table, found)
    problems = sorted(found, key=lambda p: (p.path, p.kind))
    validated: Mapping[str, Any] | None = None
    if indexes:
        validated, index_problems = _validate_indexes(table)
        problems.extend(index_problems)
    return CheckReport(
        files_checked=len(expected),
        bytes_checked=sum(f.bytes for f in expected.values()),
        snapshot_seq=tl.last_seq,
        retained_from=start,
        savepoints=pins,
        problems=tuple(problems),
        indexes=validated,
    )


def _retained_from(tl: Timeline) -> int:
    """The first event from which every snapshot is readable by time travel: the
    furthest retain point, or an earlier bookmark; -1 when never cleaned."""
    retain = furthest_retain_seq(tl)
    marks = bookmark_seqs(tl)
    if retain is None:
        return -1
    return min([retain, *marks[:1]])


def expected_files(table: Table, tl: Timeline, start: int, pins: Iterable[int]) -> dict[str, ExpectedFile]:
    """Every file the snapshots from event ``start`` on (all of them when -1) and the
    pinned snapshots read, by relative path."""
    out: dict[str, ExpectedFile] = {}
    current = {f.path for f in table.view(tl).files()}

    def add(path: str, kind: FileKind, rows: int, size: int) -> None:
        if path not in out:
            out[path] = ExpectedFile(path, kind, rows, size, path in current)

    snapshots = [tl.as_of_seq(seq) for seq in pins]
    if start >= 0:
        snapshots.append(tl.as_of_seq(start))
    for snapshot in snapshots:
        for f in table.view(snapshot).files():
            add(f.path, f.kind, f.rows, f.bytes)
    # Every file added after ``start`` was live in the snapshot right after its instant.
    for inst in tl.completed_after(start):
        if inst.action.writes_data:
            for st in CommitMetadata.from_dict(inst.metadata).files:
                add(st.path, st.kind, st.rows, st.bytes)
    return out


def _inspect_all(
    storage: Storage, files: list[ExpectedFile], progress: Progress | None, deep: bool = False
) -> list[Problem]:
    problems: list[Problem] = []
    if not files:
        return problems
    if progress is not None:
        progress(0, len(files))
    with ThreadPoolExecutor(min(CHECK_THREADS, len(files)), thread_name_prefix="lakeline-check") as pool:
        futures = [pool.submit(inspect_file, storage, f, deep) for f in files]
        for done, future in enumerate(as_completed(futures), 1):
            problems.extend(future.result())
            if progress is not None:
                progress(done, len(files))
    return problems


def inspect_file(storage: Storage, f: ExpectedFile, deep: bool = False) -> list[Problem]:
    """The problems of one file: missing, of another size than recorded, a footer that
    does not read (or counts other rows than recorded), a log without a log's columns;
    with ``deep``, a page that fails its CRC or does not decode."""
    snapshot = "current" if f.current else "retained"

    def problem(kind: ProblemKind, detail: str) -> Problem:
        return Problem(kind, f.path, detail, snapshot)

    path = storage.path(f.path)
    try:
        info = storage.fs.get_file_info(path)
    except _READ_ERRORS as e:
        return [problem(ProblemKind.UNREACHABLE, _text(e))]
    if info.type == pafs.FileType.NotFound:
        return [problem(ProblemKind.MISSING, f"recorded {f.bytes} bytes, {f.rows} rows")]
    out = []
    if info.size is not None and info.size != f.bytes:
        out.append(problem(ProblemKind.SIZE_MISMATCH, f"{info.size} bytes, recorded {f.bytes}"))
    try:
        meta = pq.read_metadata(path, filesystem=storage.fs)
        names = meta.schema.to_arrow_schema().names
    except _READ_ERRORS as e:
        out.append(problem(ProblemKind.UNREADABLE_FOOTER, _text(e)))
        return out
    if meta.num_rows != f.rows:
        out.append(problem(ProblemKind.ROW_COUNT_MISMATCH, f"{meta.num_rows} rows, recorded {f.rows}"))
    if f.kind == FileKind.LOG:
        try:
            check_log(f.path, names, (OP, SEQ))
        except CorruptLogError as e:
            out.append(problem(ProblemKind.NOT_A_LOG, _text(e)))
    if deep and (damage := damaged_data(storage, path)) is not None:
        out.append(problem(ProblemKind.DAMAGED_DATA, damage))
    return out


def damaged_data(storage: Storage, path: str) -> str | None:
    """What is wrong with the pages of the data file at ``path`` (None: every page of
    every row group verifies and decodes). Read a row group at a time (memory stays one
    row group's); a row group that fails is read again a column at a time, to name the
    column."""
    try:
        parquet = pq.ParquetFile(path, filesystem=storage.fs, **PARQUET_READ)
        for group in range(parquet.metadata.num_row_groups):
            try:
                parquet.read_row_group(group, use_threads=False)
            except _READ_ERRORS as e:
                return f"row group {group}{_failing_column(parquet, group)}: {_text(e)}"
    except _READ_ERRORS as e:
        return _text(e)
    return None


def _failing_column(parquet: pq.ParquetFile, group: int) -> str:
    """``", column <name>"`` for the first column of row group ``group`` that does not
    read ("" when none fails alone)."""
    for name in parquet.schema_arrow.names:
        try:
            parquet.read_row_group(group, columns=[name], use_threads=False)
        except _READ_ERRORS:
            return f", column {name}"
    return ""


def _still_needed(table: Table, problems: list[Problem]) -> list[Problem]:
    """Keep the problems of files a fresh timeline still retains: a clean that completed
    while the check ran may have retired (and deleted) some of them, rightly."""
    tl = table.log.refresh()
    still = expected_files(table, tl, _retained_from(tl), pinned_seqs(tl))
    return [p for p in problems if p.path in still]


def _validate_indexes(table: Table) -> tuple[Mapping[str, Any] | None, list[Problem]]:
    """``t.indexes.validate()``'s answer and its mismatches as problems; an error it
    raises (a damaged index or data file) is one problem naming what it says."""
    try:
        report = table.indexes.validate()
    except _READ_ERRORS as e:
        path = str(getattr(e, "path", None) or getattr(e, "filename", None) or "")
        return None, [Problem(ProblemKind.INDEX_UNVERIFIABLE, path, f"{_text(e)} [{type(e).__name__}]", "index")]
    problems = []
    for m in report.get("mismatches", []):
        m = dict(m) if isinstance(m, Mapping) else {"problem": m}
        path = str(m.pop("path", None) or m.pop("file", None) or "")
        detail = json.dumps(m, default=str, separators=(",", ":"))
        problems.append(Problem(ProblemKind.INDEX_MISMATCH, path, detail, "index"))
    return report, problems


def _text(error: BaseException) -> str:
    """An error as one line, redacted (a store's error may quote its connection string)."""
    return " ".join(redact(error).split()) or type(error).__name__
