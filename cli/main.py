"""The ``lakeline`` command group: wiring of the subcommands and the error boundary.

Every subcommand lives in its own module and is only registered here. The group's
``invoke`` is the one place where a :class:`LakelineError` becomes a one-line red
message and exit code 2: users of a CLI want the reason, not a traceback, and scripts
want a stable non-zero code that differs from click's usage errors only by the text
(exit 1 means "the command worked, the table did not pass": an index disagrees, a run
failed). The same holds for what the operating system or pyarrow refuse about a path
or a file (an ``OSError``: a regular file where a table folder should be, no
permission; an ``ArrowException``: a file that is not Parquet): those are the user's
input too. Anything else keeps its traceback: it is a bug to report, not to hide.
"""

from __future__ import annotations

from typing import Any

import click
import pyarrow as pa

from ..timeline.diagnostics.redact import redact
from ..timeline.errors import LakelineError
from .create_cmd import create
from .demo import demo
from .index_cmds import index
from .runner_cmds import runner
from .savepoint_cmds import savepoint
from .schema_cmds import schema
from .service_cmds import service
from .storage_cmds import storage
from .table_cmds import table
from .tables_cmds import tables
from .timeline.commands import timeline

#: Exit code of a refused operation (same as click's usage errors: the caller asked for
#: something this table cannot do).
ERROR_EXIT_CODE = 2


#: Errors about the input (a path, a file) rather than lakeline's code: one line, exit 2.
INPUT_ERRORS = (LakelineError, OSError, pa.ArrowException)


def error_line(error: BaseException) -> str:
    """The one-line message for an input error (newlines would break log greps), with its
    type (``[NotADirectoryError]`` tells more than the text alone), redacted (a store's
    error quotes what its driver said, which may include the connection string)."""
    text = " ".join(redact(error).split()) or "(no message)"
    return f"error: {text} [{type(error).__name__}]"


class LakelineGroup(click.Group):
    """A click group that prints input errors (:data:`INPUT_ERRORS`) as one red line and
    exits with 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except INPUT_ERRORS as e:
            click.secho(error_line(e), fg="red", err=True)
            ctx.exit(ERROR_EXIT_CODE)


@click.group(cls=LakelineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="lakeline", prog_name="lakeline")
def cli() -> None:
    """lakeline: Parquet tables with a timeline of instants.

    Create a table, inspect its timeline, manage its indexes and services, or run
    `lakeline demo` to see one at work.
    """


cli.add_command(create)
cli.add_command(timeline)
cli.add_command(index)
cli.add_command(service)
cli.add_command(savepoint)
cli.add_command(demo)
cli.add_command(runner)
cli.add_command(tables)
cli.add_command(storage)
cli.add_command(schema)
cli.add_command(table)


def main() -> None:
    """Entry point of the ``lakeline`` console script."""
    cli(prog_name="lakeline")
