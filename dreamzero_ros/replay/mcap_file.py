# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""MCAP files read record by record, with the CRCs the format carries checked.

Written from the MCAP specification: a file is ``<magic><Header><data section>[<summary>]
[<summary offsets>]<Footer><magic>``; messages live in Chunk records, each with the CRC-32 of
its uncompressed records; the Data End record holds the CRC-32 of the file up to it, and the
Footer the CRC-32 of the summary (through the Footer's offsets). A CRC of zero means "not
written".

The data section is walked record by record (the summary is only used for channel and schema
records, and only where its CRC verifies), so a damaged chunk costs its own messages, a damaged
summary costs nothing, and a file cut short (a recorder killed) keeps its complete chunks. Every
problem found is a :class:`Damage`, naming the part and how many messages of each channel it
held where the file's message indexes tell.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
import heapq
import mmap
from pathlib import Path
import struct
import sys
import zlib

from lz4.frame import decompress as lz4_decompress

from dreamzero_ros.closing import Closing
from dreamzero_ros.errors import McapError

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

__all__ = ['Channel', 'Damage', 'McapFile', 'write_crcs']

MAGIC = b'\x89MCAP0\r\n'
_HEADER, _FOOTER, _SCHEMA, _CHANNEL, _MESSAGE, _CHUNK, _MESSAGE_INDEX = 1, 2, 3, 4, 5, 6, 7
_DATA_END = 0x0F
_FOOTER_RECORD = 1 + 8 + 20
_RECORD_HEAD = 9  # opcode and uint64 length
_CHUNK_CRC_AT = _RECORD_HEAD + 24  # the uncompressed_crc field of a Chunk record
_DECOMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    '': bytes,
    'zstd': zstd.decompress,
    'lz4': lz4_decompress,
}


class _MalformedError(Exception):
    """A record does not fit where it stands (internal)."""


@dataclass(frozen=True)
class Channel:
    """A Channel record with its schema (``schema_name`` is the ROS type, ``pkg/msg/Type``)."""

    id: int
    topic: str
    message_encoding: str
    schema_name: str
    schema_encoding: str
    schema_data: bytes


@dataclass(frozen=True)
class Damage:
    """A part of the file that is damaged or unreadable.

    Attributes:
        part: where (``chunk at byte N``, ``summary``, ``data section``, ``bytes N-M``).
        reason: what is wrong.
        lost: channel id -> messages of that channel in the part; ``None`` where unknown.

    """

    part: str
    reason: str
    lost: dict[int, int] | None


@dataclass
class _Chunk:
    offset: int
    start_ns: int
    end_ns: int
    uncompressed_size: int
    crc: int
    compression: str
    records_at: int
    records_size: int
    counts: dict[int, int] | None = None  # from the Message Index records after the chunk

    @property
    def part(self) -> str:
        return f'chunk at byte {self.offset}'


@dataclass
class _Scan:
    chunks: list[_Chunk] = field(default_factory=list)
    loose: list[tuple[int, int, int, int]] = field(default_factory=list)  # log, channel, at, size
    schemas: dict[int, tuple[str, str, bytes]] = field(default_factory=dict)
    channels: dict[int, tuple[str, str, int]] = field(default_factory=dict)
    data_end: tuple[int, int] | None = None  # offset of the Data End record, its CRC


def _u16(data, at: int) -> int:
    return struct.unpack_from('<H', data, at)[0]


def _u32(data, at: int) -> int:
    return struct.unpack_from('<I', data, at)[0]


def _u64(data, at: int) -> int:
    return struct.unpack_from('<Q', data, at)[0]


def _string(data, at: int, end: int) -> tuple[bytes, int]:
    size = _u32(data, at)
    if at + 4 + size > end:
        raise _MalformedError('string past its record')
    return bytes(data[at + 4 : at + 4 + size]), at + 4 + size


def _crc(data, start: int, end: int, block: int = 1 << 24) -> int:
    """CRC-32 of ``data[start:end]``, read in blocks (a bag can be larger than memory)."""
    crc = 0
    for at in range(start, end, block):
        crc = zlib.crc32(data[at : min(at + block, end)], crc)
    return crc


def _records(data, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """``(offset, opcode, body start, body end)`` of each record in ``data[start:end]``."""
    at = start
    while at < end:
        if at + _RECORD_HEAD > end:
            raise _MalformedError(f'truncated record at byte {at}')
        opcode, length = data[at], _u64(data, at + 1)
        body = at + _RECORD_HEAD
        if opcode == 0 or length > end - body:
            raise _MalformedError(
                f'record at byte {at} (opcode {opcode:#04x}) runs past its section'
            )
        yield at, opcode, body, body + length
        at = body + length


def _read_schema(data, body: int, end: int) -> tuple[int, tuple[str, str, bytes]]:
    name, at = _string(data, body + 2, end)
    encoding, at = _string(data, at, end)
    schema, _ = _string(data, at, end)
    return _u16(data, body), (name.decode(), encoding.decode(), schema)


def _read_channel(data, body: int, end: int) -> tuple[int, tuple[str, str, int]]:
    topic, at = _string(data, body + 4, end)
    encoding, _ = _string(data, at, end)
    return _u16(data, body), (topic.decode(), encoding.decode(), _u16(data, body + 2))


def _read_chunk(data, offset: int, body: int, end: int) -> _Chunk:
    start_ns, end_ns, size = struct.unpack_from('<QQQ', data, body)
    compression, at = _string(data, body + 28, end)
    records_size = _u64(data, at)
    if at + 8 + records_size > end:
        raise _MalformedError('chunk records run past the chunk')
    return _Chunk(offset, start_ns, end_ns, size, _u32(data, body + 24),
                  compression.decode(), at + 8, records_size)  # fmt: skip


class McapFile(Closing):
    """An MCAP file opened for reading (memory-mapped); use as a context manager.

    Raises:
        McapError: the file is not MCAP (magic, header) or is empty.

    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.damages: list[Damage] = []
        with open(self.path, 'rb') as handle:
            try:
                self._data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            except ValueError as error:
                raise McapError(f'{self.path} is empty') from error
        try:
            self._open()
        except (McapError, _MalformedError, struct.error, UnicodeDecodeError) as error:
            self._data.close()
            raise McapError(f'{self.path} is not a readable MCAP file: {error}') from error

    def close(self) -> None:
        """Release the file."""
        self._data.close()

    # ------------------------------------------------------------------ opening
    def _open(self) -> None:
        data = self._data
        if len(data) <= len(MAGIC) + _RECORD_HEAD or data[: len(MAGIC)] != MAGIC:
            raise McapError('no MCAP magic')
        if data[len(MAGIC)] != _HEADER:
            raise McapError('no MCAP magic and header')
        data_start = len(MAGIC) + _RECORD_HEAD + _u64(data, len(MAGIC) + 1)
        footer = len(data) - len(MAGIC) - _FOOTER_RECORD
        has_footer = (
            footer >= data_start
            and data[-len(MAGIC) :] == MAGIC
            and data[footer] == _FOOTER
            and _u64(data, footer + 1) == 20
        )
        summary = None
        if has_footer:
            summary_start, _, summary_crc = struct.unpack_from('<QQI', data, footer + 9)
            if summary_start and data_start <= summary_start <= footer:
                summary = self._summary(summary_start, footer, summary_crc)
        else:
            self.damages.append(
                Damage(
                    'end of file', 'no footer: the file was cut short or its end is damaged', None
                )
            )
        scan = self._scan(data_start, footer if has_footer else len(data))
        self._chunks, self._loose, self._data_end = scan.chunks, scan.loose, scan.data_end
        schemas, channels = scan.schemas, scan.channels
        if summary is not None:
            schemas = {**schemas, **summary.schemas}
            channels = {**channels, **summary.channels}
        else:
            for chunk in self._chunks:  # channels are inside the chunks
                try:
                    records = self._chunk_records(chunk)
                    for _, opcode, body, end in _records(records, 0, len(records)):
                        if opcode == _SCHEMA:
                            key, value = _read_schema(records, body, end)
                            schemas[key] = value
                        elif opcode == _CHANNEL:
                            key, value = _read_channel(records, body, end)
                            channels[key] = value
                except (_MalformedError, struct.error, UnicodeDecodeError):
                    continue  # reported by verify() and when its messages are read
        self.channels: dict[int, Channel] = {}
        for key, (topic, encoding, schema_id) in channels.items():
            name, schema_encoding, schema = schemas.get(schema_id, ('', '', b''))
            self.channels[key] = Channel(key, topic, encoding, name, schema_encoding, schema)

    def _summary(self, start: int, footer: int, crc: int) -> _Scan | None:
        """Schemas and channels of the summary, or None (damaged, reported) where unusable."""
        if crc and _crc(self._data, start, footer + 25) != crc:
            self.damages.append(Damage('summary', 'CRC mismatch (the index is not used)', {}))
            return None
        found = _Scan()
        try:
            for _, opcode, body, end in _records(self._data, start, footer):
                if opcode == _SCHEMA:
                    key, value = _read_schema(self._data, body, end)
                    found.schemas[key] = value
                elif opcode == _CHANNEL:
                    key, value = _read_channel(self._data, body, end)
                    found.channels[key] = value
        except (_MalformedError, struct.error, UnicodeDecodeError) as error:
            self.damages.append(Damage('summary', f'unreadable ({error})', {}))
            return None
        return found

    def _scan(self, start: int, end: int) -> _Scan:
        """Walk the data section: chunks, their message indexes, loose records, Data End."""
        scan = _Scan()
        data = self._data
        at = start
        current: _Chunk | None = None  # the chunk that Message Index records follow
        try:
            for at, opcode, body, record_end in _records(data, start, end):
                if opcode == _MESSAGE_INDEX:
                    if current is not None:
                        current.counts = current.counts or {}
                        current.counts[_u16(data, body)] = _u32(data, body + 2) // 16
                    continue
                current = None
                if opcode == _CHUNK:
                    try:
                        current = _read_chunk(data, at, body, record_end)
                        scan.chunks.append(current)
                    except (_MalformedError, struct.error) as error:
                        self.damages.append(Damage(f'chunk at byte {at}', f'header: {error}', None))
                elif opcode == _MESSAGE:
                    channel, log_ns = _u16(data, body), _u64(data, body + 6)
                    scan.loose.append((log_ns, channel, body + 22, record_end - body - 22))
                elif opcode == _SCHEMA:
                    key, value = _read_schema(data, body, record_end)
                    scan.schemas[key] = value
                elif opcode == _CHANNEL:
                    key, value = _read_channel(data, body, record_end)
                    scan.channels[key] = value
                elif opcode == _DATA_END:
                    scan.data_end = (at, _u32(data, body))
                    break
        except (_MalformedError, struct.error, UnicodeDecodeError) as error:
            self.damages.append(Damage(f'bytes {at}-{end}', f'unreadable records ({error})', None))
        return scan

    # ------------------------------------------------------------------ reading
    @property
    def message_counts(self) -> dict[int, int]:
        """Channel id -> messages, from the message indexes (decompressing unindexed chunks)."""
        counts: dict[int, int] = {}
        for chunk in self._chunks:
            for channel, count in self._chunk_counts(chunk).items():
                counts[channel] = counts.get(channel, 0) + count
        for _, channel, _, _ in self._loose:
            counts[channel] = counts.get(channel, 0) + 1
        return counts

    @property
    def time_range(self) -> tuple[int, int] | None:
        """Log times of the first and the last message (ns), or None without messages."""
        times = [(c.start_ns, c.end_ns) for c in self._chunks if self._chunk_counts(c)]
        times += [(log_ns, log_ns) for log_ns, _, _, _ in self._loose]
        if not times:
            return None
        return min(t[0] for t in times), max(t[1] for t in times)

    def _chunk_counts(self, chunk: _Chunk) -> dict[int, int]:
        if chunk.counts is None:
            chunk.counts = {}
            try:
                records = self._chunk_records(chunk)
                for _, opcode, body, _ in _records(records, 0, len(records)):
                    if opcode == _MESSAGE:
                        channel = _u16(records, body)
                        chunk.counts[channel] = chunk.counts.get(channel, 0) + 1
            except _MalformedError:
                chunk.counts = None
                return {}
        return chunk.counts

    def _chunk_records(self, chunk: _Chunk) -> bytes:
        """The chunk's records, decompressed and checked against the chunk's size and CRC."""
        decompress = _DECOMPRESSORS.get(chunk.compression)
        if decompress is None:
            raise _MalformedError(f'unknown compression {chunk.compression!r}')
        try:
            records = decompress(
                self._data[chunk.records_at : chunk.records_at + chunk.records_size]
            )
        except Exception as error:  # the decompressors raise their own error types
            raise _MalformedError(f'cannot be decompressed ({error})') from error
        if len(records) != chunk.uncompressed_size:
            raise _MalformedError(
                f'{len(records)} bytes decompressed, {chunk.uncompressed_size} stated'
            )
        if chunk.crc and zlib.crc32(records) != chunk.crc:
            raise _MalformedError('CRC mismatch')
        return records

    def _damage(self, chunk: _Chunk, error: Exception) -> Damage:
        return Damage(chunk.part, str(error), dict(chunk.counts) if chunk.counts else None)

    def messages(
        self,
        channels: set[int],
        start_ns: int | None = None,
        stop_ns: int | None = None,
        on_damage: Callable[[Damage], None] | None = None,
    ) -> Iterator[tuple[int, int, bytes]]:
        """Yield ``(channel id, log time ns, data)`` of ``channels`` in log-time order.

        A damaged chunk yields nothing and is passed to ``on_damage`` (raised as
        :class:`McapError` without one) when its turn comes.
        """
        low, high = start_ns or 0, stop_ns if stop_ns is not None else 2**64
        sources = [
            self._chunk_messages(chunk, channels, low, high, on_damage)
            for chunk in self._chunks
            if chunk.start_ns < high
            and chunk.end_ns >= low
            and (chunk.counts is None or channels & set(chunk.counts))
        ]
        loose = sorted(
            (log_ns, 1, channel, bytes(self._data[at : at + size]))
            for log_ns, channel, at, size in self._loose
            if channel in channels and low <= log_ns < high
        )
        for log_ns, marker, channel, payload in heapq.merge(*sources, loose):
            if marker:
                yield channel, log_ns, payload

    def _chunk_messages(
        self,
        chunk: _Chunk,
        channels: set[int],
        low: int,
        high: int,
        on_damage: Callable[[Damage], None] | None,
    ) -> Iterator[tuple[int, int, int, bytes]]:
        """One chunk's messages, sorted, after a marker that defers decompression to its turn."""
        yield chunk.start_ns, 0, 0, b''
        try:
            records = self._chunk_records(chunk)
            found = []
            for _, opcode, body, end in _records(records, 0, len(records)):
                if opcode == _MESSAGE:
                    channel, log_ns = _u16(records, body), _u64(records, body + 6)
                    if channel in channels and low <= log_ns < high:
                        found.append((log_ns, 1, channel, records[body + 22 : end]))
        except (_MalformedError, struct.error) as error:
            damage = self._damage(chunk, error)
            if on_damage is None:
                raise McapError(f'{self.path}: {damage.part}: {damage.reason}') from error
            on_damage(damage)
            return
        found.sort(key=lambda message: message[0])
        yield from found

    # ---------------------------------------------------------------- verifying
    def verify(self) -> list[Damage]:
        """Check every chunk's CRC and records, and the data section's CRC; all damages found."""
        found: list[Damage] = []
        for chunk in self._chunks:
            try:
                records = self._chunk_records(chunk)
                for _ in _records(records, 0, len(records)):
                    pass
            except _MalformedError as error:
                self._chunk_counts(chunk)
                found.append(self._damage(chunk, error))
        if self._data_end is not None and self._data_end[1]:
            at, crc = self._data_end
            if _crc(self._data, 0, at) != crc and not found:
                found.append(
                    Damage('data section', 'CRC mismatch outside the chunks (not localised)', None)
                )
        return self.damages + found

    @property
    def unverified_chunks(self) -> int:
        """Chunks written without a CRC: damage inside their messages cannot be detected."""
        return sum(1 for chunk in self._chunks if not chunk.crc)


def write_crcs(path: str | Path) -> None:
    """Fill in the chunk, data section and summary CRCs of an MCAP file written without them.

    Raises:
        McapError: where the file is not a complete MCAP file.

    """
    with McapFile(path) as mcap:
        if mcap.damages or mcap._data_end is None:
            raise McapError(f'{path}: not a complete MCAP file')
        crcs = [
            (c.offset + _CHUNK_CRC_AT, zlib.crc32(mcap._chunk_records(c))) for c in mcap._chunks
        ]
        data_end = mcap._data_end[0]
    with open(path, 'r+b') as handle, mmap.mmap(handle.fileno(), 0) as data:
        for at, crc in crcs:
            struct.pack_into('<I', data, at, crc)
        struct.pack_into('<I', data, data_end + _RECORD_HEAD, _crc(data, 0, data_end))
        footer = len(data) - len(MAGIC) - _FOOTER_RECORD
        summary_start = _u64(data, footer + 9)
        if summary_start:
            struct.pack_into('<I', data, footer + 25, _crc(data, summary_start, footer + 25))
