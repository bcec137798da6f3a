# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The storage files of a rosbag2, read message by message, with the damage each one shows.

MCAP files are read by :mod:`.mcap_file` (every CRC checked, damaged chunks skipped); sqlite3
files by rosbags, checked with SQLite's own ``quick_check`` (a database has no CRC of its rows:
a damaged payload shows only where it does not decode).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
import heapq
from pathlib import Path, PurePath
import sqlite3
import sys

from rosbags.interfaces import (
    Connection,
    ConnectionExtRosbag2,
    MessageDefinition,
    MessageDefinitionFormat,
)
from rosbags.rosbag2 import Reader
import yaml

from dreamzero_ros.errors import BagError, McapError
from dreamzero_ros.replay.integrity import DamagedPart
from dreamzero_ros.replay.mcap_file import Damage, McapFile

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

__all__ = ['McapSource', 'RosbagsSource', 'open_source']

_SCHEMA_FORMATS = {'ros2msg': MessageDefinitionFormat.MSG, 'ros2idl': MessageDefinitionFormat.IDL}

OnDamage = Callable[[DamagedPart], None]


class McapSource:
    """The MCAP files of a bag (a split bag has several), merged in log-time order."""

    def __init__(self, files: Sequence[Path], compressed_messages: bool = False) -> None:
        self.damaged: list[DamagedPart] = []
        self._files: list[McapFile] = []
        for path in files:
            try:
                self._files.append(McapFile(path))
            except (McapError, OSError) as error:
                self.damaged.append(DamagedPart(path.name, 'file', str(error), None))
        if not self._files:
            raise BagError('; '.join(str(part) for part in self.damaged) or 'no MCAP file')
        self._compressed = compressed_messages
        self.connections: list[Connection] = []
        self._channel: dict[int, tuple[int, int]] = {}  # connection id -> file, channel id
        for index, mcap in enumerate(self._files):
            self.damaged += [self._part(mcap, damage) for damage in mcap.damages]
            counts = mcap.message_counts
            for channel in mcap.channels.values():
                schema = _SCHEMA_FORMATS.get(channel.schema_encoding, MessageDefinitionFormat.NONE)
                text = channel.schema_data.decode('utf-8', errors='replace')
                connection = Connection(
                    len(self.connections) + 1, channel.topic, channel.schema_name,
                    MessageDefinition(schema, text), '', counts.get(channel.id, 0),
                    ConnectionExtRosbag2(channel.message_encoding, []), None,
                )  # fmt: skip
                self.connections.append(connection)
                self._channel[connection.id] = (index, channel.id)
        ranges = [r for mcap in self._files if (r := mcap.time_range) is not None]
        self.start_ns = min((r[0] for r in ranges), default=0)
        self.end_ns = max((r[1] + 1 for r in ranges), default=0)
        self.unverified_chunks = sum(mcap.unverified_chunks for mcap in self._files)

    @staticmethod
    def _part(mcap: McapFile, damage: Damage) -> DamagedPart:
        messages = None
        if damage.lost is not None:
            messages = {}
            for channel, count in damage.lost.items():
                topic = mcap.channels[channel].topic if channel in mcap.channels else '?'
                messages[topic] = messages.get(topic, 0) + count
        return DamagedPart(mcap.path.name, damage.part, damage.reason, messages)

    def close(self) -> None:
        """Release the files."""
        for mcap in self._files:
            mcap.close()

    def messages(
        self,
        connections: Sequence[Connection],
        start_ns: int | None,
        stop_ns: int | None,
        on_damage: OnDamage | None,
    ) -> Iterator[tuple[Connection, int, bytes]]:
        """``(connection, log time ns, CDR data)`` in log-time order (see ``McapFile.messages``)."""
        by_file: dict[int, dict[int, Connection]] = {}
        for connection in connections:
            index, channel = self._channel[connection.id]
            by_file.setdefault(index, {})[channel] = connection
        streams = [
            self._file_messages(index, wanted, start_ns, stop_ns, on_damage)
            for index, wanted in by_file.items()
        ]
        yield from heapq.merge(*streams, key=lambda message: message[1])

    def _file_messages(
        self,
        index: int,
        wanted: dict[int, Connection],
        start_ns: int | None,
        stop_ns: int | None,
        on_damage: OnDamage | None,
    ) -> Iterator[tuple[Connection, int, bytes]]:
        mcap = self._files[index]
        report = None if on_damage is None else lambda d: on_damage(self._part(mcap, d))
        try:
            for channel, log_ns, data in mcap.messages(set(wanted), start_ns, stop_ns, report):
                yield wanted[channel], log_ns, zstd.decompress(data) if self._compressed else data
        except McapError as error:
            raise BagError(str(error)) from error

    def verify(self) -> list[DamagedPart]:
        """Every damaged part of every file (CRCs of chunks, data sections and summaries)."""
        parts = [part for part in self.damaged if part.part == 'file']
        for mcap in self._files:
            parts += [self._part(mcap, damage) for damage in mcap.verify()]
        return parts


class RosbagsSource:
    """A bag rosbags reads (sqlite3 storage), checked with SQLite's ``quick_check``."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._reader = Reader(path)
        self._reader.open()
        self.connections: list[Connection] = list(self._reader.connections)
        self.start_ns = int(self._reader.start_time)
        self.end_ns = int(self._reader.end_time)
        self.damaged: list[DamagedPart] = []
        self.unverified_chunks = 0

    def close(self) -> None:
        """Close the storage."""
        self._reader.close()

    def messages(
        self,
        connections: Sequence[Connection],
        start_ns: int | None,
        stop_ns: int | None,
        on_damage: OnDamage | None,
    ) -> Iterator[tuple[Connection, int, bytes]]:
        """``(connection, log time ns, CDR data)`` in log-time order (``None`` data kept)."""
        iterator = self._reader.messages(connections=connections, start=start_ns, stop=stop_ns)
        try:
            yield from iterator
        except Exception as error:  # sqlite (apsw) raises its own types on a damaged database
            part = DamagedPart(self._path.name, 'database', f'unreadable: {error}', None)
            if on_damage is None:
                raise BagError(str(part)) from error
            on_damage(part)

    def verify(self) -> list[DamagedPart]:
        """SQLite's ``quick_check`` of each database file."""
        files = sorted(self._path.glob('*.db3')) if self._path.is_dir() else [self._path]
        parts = []
        for path in files:
            try:
                with sqlite3.connect(f'file:{path}?mode=ro&immutable=1', uri=True) as database:
                    problems = [row[0] for row in database.execute('PRAGMA quick_check')]
            except sqlite3.Error as error:
                problems = [str(error)]
            if problems != ['ok']:
                parts.append(DamagedPart(path.name, 'database', '; '.join(problems[:3]), None))
        return parts


def _mcap_files(folder: Path) -> tuple[list[Path], bool, list[DamagedPart]] | None:
    """The MCAP files that ``metadata.yaml`` lists, whether messages are compressed, missing."""
    try:
        info = yaml.safe_load((folder / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
        storage = info['storage_identifier']
        names = [PurePath(name).name for name in info['relative_file_paths']]
        mode = str(info.get('compression_mode') or '').lower()
    except (OSError, yaml.YAMLError, RecursionError, KeyError, TypeError) as error:
        raise BagError(f'metadata.yaml is unreadable: {error!r}') from error
    if storage != 'mcap':
        return None
    if mode == 'file':
        raise BagError('file-compressed MCAP bags are not supported: decompress the files first')
    files = [folder / name for name in names if (folder / name).is_file()]
    missing = [DamagedPart(n, 'file', 'missing', None) for n in names if not (folder / n).is_file()]
    return files, mode == 'message', missing


def open_source(path: Path) -> McapSource | RosbagsSource:
    """The reader of the bag folder (or single ``.mcap`` / ``.db3`` file) at ``path``.

    Raises:
        BagError: and what the storage backends raise where nothing can be read.

    """
    if path.is_file():
        return McapSource([path]) if path.suffix == '.mcap' else RosbagsSource(path)
    if not (path / 'metadata.yaml').is_file():
        raise BagError(f'{path} has no metadata.yaml (`ros2 bag reindex` rebuilds it)')
    mcap = _mcap_files(path)
    if mcap is None:
        return RosbagsSource(path)
    files, compressed, missing = mcap
    if not files:
        raise BagError('; '.join(str(part) for part in missing) or 'no storage file listed')
    source = McapSource(files, compressed)
    source.damaged = missing + source.damaged
    return source
