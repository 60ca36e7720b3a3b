"""Files read per filter, under whichever lakeline is importable: the same tables and the
300 filters of ``test_pruning_soundness.py``, to compare the pruning of two versions.

    python compare_pruning.py build DIR          # the cow and mor tables, in DIR
    python compare_pruning.py count DIR OUT.json # files each filter reads (relative paths)
    python compare_pruning.py diff OLD.json NEW.json

Build the tables once (with the older version, whose writer the newer one reads) and
count with both; ``diff`` prints the totals and every filter where NEW reads a file OLD
does not. Uses only the public API (``Table``, ``scan(filter).files()``).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location("soundness", Path(__file__).with_name("test_pruning_soundness.py"))
assert _spec is not None and _spec.loader is not None
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)
KINDS = ("cow", "mor")


def build(root: Path) -> None:
    for kind in KINDS:
        _, max_id = cases.build_table(root / kind, kind)
        (root / f"{kind}.max_id").write_text(str(max_id))


def count(root: Path, out: Path) -> None:
    from lakeline.table import Table

    result: dict[str, list[dict[str, object]]] = {}
    for kind in KINDS:
        t = Table(root / kind) if not hasattr(Table, "open") else Table.open(root / kind)
        max_id = int((root / f"{kind}.max_id").read_text())
        base = str((root / kind).resolve())
        result[kind] = [
            {"filter": str(flt), "files": sorted(p[len(base) :] for p in t.scan(filter=flt).files())}
            for flt in cases.random_filters(max_id)
        ]
    out.write_text(json.dumps(result))


def diff(old_path: Path, new_path: Path) -> None:
    old, new = json.loads(old_path.read_text()), json.loads(new_path.read_text())
    for kind in KINDS:
        o_total = sum(len(c["files"]) for c in old[kind])
        n_total = sum(len(c["files"]) for c in new[kind])
        more = [(o, n) for o, n in zip(old[kind], new[kind]) if set(n["files"]) - set(o["files"])]
        fewer = sum(1 for o, n in zip(old[kind], new[kind]) if set(o["files"]) - set(n["files"]))
        print(
            f"{kind}: {len(old[kind])} filters: old read {o_total} files, new {n_total}; "
            f"new reads fewer on {fewer} filters, more on {len(more)}"
        )
        for o, n in more:
            print(f"  MORE: {n['filter']}: {len(o['files'])} -> {len(n['files'])}")


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    if cmd == "build":
        build(Path(args[0]))
    elif cmd == "count":
        count(Path(args[0]), Path(args[1]))
    else:
        diff(Path(args[0]), Path(args[1]))
