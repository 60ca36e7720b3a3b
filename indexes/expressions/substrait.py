"""Just enough of the protobuf wire format to read the Substrait messages pyarrow writes.

Why not the ``substrait-protobuf`` package: it needs ``protobuf`` (a new dependency of
every install), and its current classes no longer know fields pyarrow still writes
(Substrait 0.88 removed ``Literal.timestamp`` = 14 and ``timestamp_tz`` = 27, and
``ExtendedExpression.extension_uris`` = 1 became reserved), so they would silently drop
timestamp literals. pyarrow writes Substrait 0.44 (``ExtendedExpression.version``); the
field numbers the decoder reads are those of that release's ``proto/substrait/*.proto``
(:mod:`.from_arrow` names each one where it reads it).

The wire format (protobuf's "Encoding" page): a message is a sequence of fields, each a
varint key ``number << 3 | wire_type`` and a value: 0 varint, 1 eight bytes, 2 a varint
length then that many bytes (strings, bytes, nested messages, packed repeated), 5 four
bytes. proto3 omits fields at their default (0, empty), so absent means default.
"""

from __future__ import annotations

import struct

from ...timeline.errors import InvalidFilterError

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


class MalformedSubstraitError(InvalidFilterError):
    """The bytes are not the protobuf message the decoder expected."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise MalformedSubstraitError("truncated or overlong varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, pos


class Message:
    """One decoded message: its fields by number, each a list of raw values (an int for
    a varint, bytes for the other wire types), in the order they appeared."""

    __slots__ = ("fields",)

    def __init__(self, buf: bytes) -> None:
        self.fields: dict[int, list[int | bytes]] = {}
        pos = 0
        while pos < len(buf):
            key, pos = _varint(buf, pos)
            number, wire = key >> 3, key & 7
            value: int | bytes
            if wire == _VARINT:
                value, pos = _varint(buf, pos)
            elif wire in (_I64, _I32):
                size = 8 if wire == _I64 else 4
                value, pos = buf[pos : pos + size], pos + size
            elif wire == _LEN:
                size, pos = _varint(buf, pos)
                value, pos = buf[pos : pos + size], pos + size
            else:
                raise MalformedSubstraitError(f"unsupported wire type {wire} (field {number})")
            if pos > len(buf) or number == 0:
                raise MalformedSubstraitError("truncated message")
            self.fields.setdefault(number, []).append(value)

    def has(self, number: int) -> bool:
        return number in self.fields

    def first_of(self, *numbers: int) -> int | None:
        """Which of the fields of a ``oneof`` is set (the first found), or None."""
        return next((n for n in numbers if n in self.fields), None)

    def raw(self, number: int) -> int | bytes | None:
        values = self.fields.get(number)
        return values[-1] if values else None  # proto3: the last occurrence wins

    def blob(self, number: int) -> bytes:
        value = self.raw(number)
        if value is None:
            return b""
        if not isinstance(value, bytes):
            raise MalformedSubstraitError(f"field {number} is not length-delimited")
        return value

    def string(self, number: int) -> str:
        try:
            return self.blob(number).decode("utf-8")
        except UnicodeDecodeError as e:
            raise MalformedSubstraitError(f"field {number} is not UTF-8") from e

    def strings(self, number: int) -> list[str]:
        """Every occurrence of a repeated ``string`` field, in order."""
        out = []
        for value in self.fields.get(number, []):
            if not isinstance(value, bytes):
                raise MalformedSubstraitError(f"field {number} is not length-delimited")
            try:
                out.append(value.decode("utf-8"))
            except UnicodeDecodeError as e:
                raise MalformedSubstraitError(f"field {number} is not UTF-8") from e
        return out

    def uint(self, number: int) -> int:
        value = self.raw(number)
        if value is None:
            return 0
        if not isinstance(value, int):
            raise MalformedSubstraitError(f"field {number} is not a varint")
        return value

    def sint(self, number: int) -> int:
        """A signed ``int32``/``int64`` (negative ones are sign-extended to 64 bits)."""
        value = self.uint(number)
        return value - (1 << 64) if value >= 1 << 63 else value

    def fp64(self, number: int) -> float:
        value = self.raw(number)
        if not isinstance(value, bytes) or len(value) != 8:
            raise MalformedSubstraitError(f"field {number} is not a double")
        return float(struct.unpack("<d", value)[0])

    def fp32(self, number: int) -> float:
        value = self.raw(number)
        if not isinstance(value, bytes) or len(value) != 4:
            raise MalformedSubstraitError(f"field {number} is not a float")
        return float(struct.unpack("<f", value)[0])

    def message(self, number: int) -> Message:
        """A nested message (empty when absent, as proto3 reads it)."""
        return Message(self.blob(number))

    def messages(self, number: int) -> list[Message]:
        out = []
        for value in self.fields.get(number, []):
            if not isinstance(value, bytes):
                raise MalformedSubstraitError(f"field {number} is not a message")
            out.append(Message(value))
        return out
