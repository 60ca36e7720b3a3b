"""``t.check()`` and ``lakeline table check`` on a table in S3 (SeaweedFS): the files are
stat'ed and their footers read through the table's object store, not the local disk."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from lakeline.cli.main import cli
from lakeline.table.check import ProblemKind
from lakeline.timeline.view.file_group import FileKind

from tests.seaweedfs import SeaweedServer
from tests.table.check._tables import OTHER_DAY, current_file, delete, flip_footer, make, retained_only, truncate


def test_a_damaged_table_on_s3_names_each_file(s3: SeaweedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    t = make(s3.uri(), "mor", storage_options=s3.options())
    assert t.storage.objects is not None
    healthy = t.check(indexes=False)
    assert healthy.ok and healthy.files_checked > len(t.view(t.timeline).files())
    damaged = {
        current_file(t, FileKind.BASE): ProblemKind.MISSING,
        current_file(t, FileKind.LOG, OTHER_DAY): ProblemKind.SIZE_MISMATCH,
        retained_only(t): ProblemKind.UNREADABLE_FOOTER,
    }
    delete(t, current_file(t, FileKind.BASE))
    truncate(t, current_file(t, FileKind.LOG, OTHER_DAY))
    flip_footer(t, retained_only(t))
    report = t.check(indexes=False)
    assert {p.path for p in report.problems} == set(damaged)
    assert {(p.path, p.kind) for p in report.problems} >= set(damaged.items())
    # The command reads the store's options from the environment (AWS_*), as the CLI does.
    for key, value in s3.options().items():
        monkeypatch.setenv(key, value)
    result = CliRunner().invoke(cli, ["table", "check", t.path, "--json", "--skip-indexes"])
    assert result.exit_code == 1, result.output
    assert {p["path"] for p in json.loads(result.stdout)["problems"]} == set(damaged)
