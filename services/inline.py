"""``inline(name)``: a table service a writer runs right after its commit, when due.

Hudi's inline table services: instead of (or beside) a separate runner, each write
checks after its commit whether compaction, clustering, cleaning or archival is due by
the table's trigger strategy (``compaction.delta-commits``, ...) and, if so, runs it in
the writer's process on the writer's engine. It goes through the same schedule/execute
framework as every other run (:meth:`TableServices.run`: pending plans nobody holds are
finished, a live runner's are left alone, a new plan only when the trigger says it is
due), so inline services and runners over one table never execute an instant twice.
The value itself (:class:`~lakeline.table.hooks.Inline`) lives with the other hooks,
where the ``inline.services`` table property makes it too.
"""

from __future__ import annotations

from typing import Any

from ..table.hooks import INLINE_SERVICES, Inline
from ..timeline.errors import UnknownServiceError


def inline(name: str, **options: Any) -> Inline:
    """The inline service ``name`` (``Hooks(services=[inline("compaction")])``);
    ``options`` go to its planner, as for ``t.services.run(name, **options)``.

    Raises:
        UnknownServiceError: ``name`` is not one of compaction, clustering, cleaning, archival.
    """
    if name not in INLINE_SERVICES:
        raise UnknownServiceError(f"{name!r} cannot run inline; one of {', '.join(INLINE_SERVICES)}")
    return Inline(name, dict(options))


__all__ = ["Inline", "inline"]
