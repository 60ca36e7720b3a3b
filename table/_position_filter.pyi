"""Types of the optional C extension ``table/_position_filter.c`` (see
:mod:`.position_filter`).

``values`` and ``validity`` are an Arrow array's buffers (``validity`` None: no nulls),
``offset`` and ``length`` its rows in them, ``width`` the bytes per value (0: one bit,
booleans; any width, a fixed_size_binary's included); ``positions`` an int64 buffer of
ascending row numbers (from ``offset``). Both return a count of nulls: written
(``drop_rows``) or dropped (``fill_holes``). Rows or positions the buffers do not hold
raise :class:`~lakeline.timeline.errors.CorruptFileError`.
"""

from typing_extensions import Buffer  # collections.abc.Buffer from Python 3.12 on

def drop_rows(
    values: Buffer,
    validity: Buffer | None,
    offset: int,
    length: int,
    width: int,
    positions: Buffer,
    out_values: Buffer,
    out_validity: Buffer | None,
    out_offset: int,
    /,
) -> int: ...
def fill_holes(
    values: Buffer, validity: Buffer | None, offset: int, length: int, width: int, positions: Buffer, /
) -> int: ...
