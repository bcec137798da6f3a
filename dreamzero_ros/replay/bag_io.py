# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Read and write rosbag2 files (mcap and sqlite3), with clear errors on bad or damaged bags."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rosbags.interfaces import Connection
from rosbags.rosbag2 import StoragePlugin, Writer, WriterError
from rosbags.typesys.store import Typestore

from dreamzero_ros.closing import Closing
from dreamzero_ros.errors import BagError, DefinitionError, McapError
from dreamzero_ros.replay.bag_sources import open_source
from dreamzero_ros.replay.bag_types import connection_typestore
from dreamzero_ros.replay.integrity import DAMAGED_CHUNK, UNDECODABLE, DamagedPart, IntegrityReport
from dreamzero_ros.replay.mcap_file import write_crcs
from dreamzero_ros.replay.typestore import replay_typestore

__all__ = ['STORAGES', 'BagReader', 'BagWriter']

#: rosbag2 storage plugin names, as ``ros2 bag record -s`` spells them.
STORAGES = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}


class BagReader(Closing):
    """A rosbag2 opened for reading; use as a context manager.

    Only the connections of the topics read are decoded: each with the bag's own definition of
    its type (the replay type store where the bag has none, see :mod:`.bag_types`), so a topic
    whose definition cannot be parsed is an error only when it is read.

    Damage (an MCAP chunk, summary or data section whose CRC does not match, a file cut short,
    a database that fails SQLite's check, a payload that does not decode) is an error, unless
    ``allow_partial``: then the damaged parts are skipped and :meth:`verify` reports them with
    the number of messages skipped on each topic.
    """

    def __init__(self, path: str | Path, allow_partial: bool = False) -> None:
        self.path = Path(path)
        self.allow_partial = allow_partial
        if not self.path.exists():
            raise BagError(f'bag {self.path} does not exist')
        try:
            self._source = open_source(self.path)
        except Exception as error:  # storage backends (mcap, sqlite/apsw, yaml) raise many types
            raise BagError(f'cannot open bag {self.path}: {error}') from error
        #: Log time of the first message, and just past the last one, ns.
        self.start_ns: int = self._source.start_ns
        self.end_ns: int = self._source.end_ns
        self._stores: dict[int, Typestore | None] = {}
        self._type_errors: dict[int, str] = {}
        if self._source.damaged and not allow_partial:
            self._source.close()
            raise self._damage_error(self._source.damaged)

    def close(self) -> None:
        """Close the underlying storage."""
        self._source.close()

    def _damage_error(self, parts: Sequence[DamagedPart | str]) -> BagError:
        listing = '; '.join(str(part) for part in parts)
        return BagError(
            f'bag {self.path} is corrupt or truncated: {listing} '
            '(--allow-partial replays the intact parts)'
        )

    def _damage_listing(self) -> str:
        return '; '.join(str(part) for part in self._source.damaged)

    @property
    def topics(self) -> dict[str, str]:
        """Topic -> message type name (``pkg/msg/Type``)."""
        return {c.topic: c.msgtype for c in self._source.connections}

    def message_count(self, topic: str) -> int:
        """Number of messages the bag's index lists on ``topic``."""
        return sum(c.msgcount for c in self._source.connections if c.topic == topic)

    def require(self, topic: str, msgtypes: Sequence[str], role: str) -> str:
        """Check that ``topic`` exists with one of ``msgtypes``; return its type.

        Raises:
            BagError: naming the role, the topic and what the bag holds instead.

        """
        topics = self.topics
        if topic not in topics:
            listing = ', '.join(f'{name} [{kind}]' for name, kind in sorted(topics.items()))
            if self._source.damaged:  # --allow-partial: the topic may be in the lost part
                raise BagError(
                    f'{role} topic {topic!r} is not in the intact parts of bag {self.path} '
                    f'(they hold: {listing or "nothing"}); the bag is damaged and the topic '
                    f'may be in what is lost: {self._damage_listing()}'
                )
            raise BagError(
                f'{role} topic {topic!r} is not in bag {self.path}; '
                f'it holds: {listing or "nothing"}'
            )
        if topics[topic] not in msgtypes:
            raise BagError(
                f'{role} topic {topic!r} in bag {self.path} has type {topics[topic]}, '
                f'expected {" or ".join(msgtypes)}'
            )
        if self.message_count(topic) == 0:
            lost = ''
            if self._source.damaged:
                lost = f' in its intact parts ({self._damage_listing()})'
            raise BagError(f'{role} topic {topic!r} in bag {self.path} has no messages{lost}')
        return topics[topic]

    def first_log_ns(self, topic: str) -> int:
        """Log time of the first message on ``topic``."""
        for _, log_ns, _ in self.messages([topic]):
            return log_ns
        raise BagError(f'topic {topic!r} in bag {self.path} has no messages')

    def verify(self, topics: Sequence[str]) -> IntegrityReport:
        """Check the whole bag and decode every message of ``topics``; report what is damaged.

        Every CRC of an MCAP file is checked (chunks, data section, summary), an SQLite file
        gets ``quick_check``; the messages of ``topics`` that replay would skip are counted by
        topic and reason.

        Raises:
            BagError: where anything is damaged, unless ``allow_partial``.

        """
        report = IntegrityReport(unverified_chunks=self._source.unverified_chunks)
        try:
            report.damaged = self._source.verify()
        except Exception as error:  # a storage backend failing on a damaged file
            report.damaged = [DamagedPart(self.path.name, 'bag', f'unreadable: {error}', None)]
        wanted = set(topics)
        for part in report.damaged:
            for topic, count in (part.messages or {}).items():
                if topic in wanted and part.part.startswith('chunk'):
                    report.skip(topic, DAMAGED_CHUNK, count)
        for topic, _, message in self._iterate(topics, None, None, False, tolerant=True):
            if message is None:
                report.skip(topic, UNDECODABLE)
        if not report.complete and not self.allow_partial:
            raise self._damage_error([report.describe().replace('\n', '; ')])
        return report

    def messages(
        self, topics: Sequence[str], start_ns: int | None = None, stop_ns: int | None = None
    ) -> Iterator[tuple[str, int, Any]]:
        """Yield ``(topic, log_time_ns, message)`` in log-time order, deserialised.

        Raises:
            BagError: where a message cannot be read or deserialised (corrupt or truncated
                bag), unless ``allow_partial``: then such messages are skipped.

        """
        return self._iterate(topics, start_ns, stop_ns, True)

    def raw_messages(self, topics: Sequence[str]) -> Iterator[tuple[str, int, bytes]]:
        """Yield ``(topic, log_time_ns, serialised CDR bytes)`` in log-time order.

        Payloads are checked by decoding them where the bag's definition of their type parses
        (damaged ones raise :class:`BagError`, or are skipped with ``allow_partial``).
        """
        return self._iterate(topics, None, None, False)

    def _iterate(
        self,
        topics: Sequence[str],
        start_ns: int | None,
        stop_ns: int | None,
        deserialize: bool,
        tolerant: bool = False,
    ) -> Iterator[tuple[str, int, Any]]:
        """Messages of ``topics``; damaged ones skipped or raised (``tolerant``: given as None)."""
        connections = [c for c in self._source.connections if c.topic in set(topics)]
        if not connections:
            return
        stores = {c.id: self._typestore(c, required=deserialize) for c in connections}
        on_damage = (lambda part: None) if self.allow_partial or tolerant else None
        iterator = self._source.messages(connections, start_ns, stop_ns, on_damage)
        while True:
            try:
                connection, log_ns, raw = next(iterator)
            except StopIteration:
                return
            except (BagError, McapError) as error:
                raise self._damage_error([str(error)]) from error
            store = stores[connection.id]
            message: Any = None
            try:
                if store is not None:
                    message = store.deserialize_cdr(raw, connection.msgtype)
                if not deserialize:
                    message = bytes(raw)
            except Exception as error:  # the CDR decoder raises many types on damaged payloads
                if tolerant:
                    message = None
                elif self.allow_partial:
                    continue
                else:
                    problem = f'a message on {connection.topic} at {log_ns} ns does not decode'
                    raise self._damage_error([f'{problem}: {error}']) from error
            yield connection.topic, int(log_ns), message

    def _typestore(self, connection: Connection, required: bool) -> Typestore | None:
        """The type store decoding ``connection``, parsed from the bag on first use.

        Where the type cannot be decoded, None unless ``required`` (then :class:`BagError`).
        """
        if connection.id not in self._stores:
            try:
                encoding = connection.ext.serialization_format
                if encoding != 'cdr':
                    raise DefinitionError(f'its messages are {encoding!r}, not CDR')
                self._stores[connection.id] = connection_typestore(
                    connection.msgtype, connection.msgdef, connection.digest
                )
            except DefinitionError as error:
                self._stores[connection.id] = None
                self._type_errors[connection.id] = str(error)
        if self._stores[connection.id] is None and required:
            raise BagError(
                f'topic {connection.topic!r} in bag {self.path} cannot be decoded: '
                f'{self._type_errors[connection.id]}'
            )
        return self._stores[connection.id]


class BagWriter(Closing):
    """A new rosbag2 (version 9) for writing rosbags message objects; use as a context manager."""

    def __init__(self, path: str | Path, storage: str = 'mcap') -> None:
        if storage not in STORAGES:
            raise BagError(f'unknown storage {storage!r}; choose one of {sorted(STORAGES)}')
        self.path = Path(path)
        if self.path.exists():
            raise BagError(f'{self.path} exists; rosbag2 writes a new folder')
        self._store = replay_typestore()
        self._writer = Writer(self.path, version=9, storage_plugin=STORAGES[storage])
        self._storage = storage
        self._connections: dict[str, Any] = {}
        try:
            self._writer.open()
        except WriterError as error:
            raise BagError(f'cannot create bag {self.path}: {error}') from error

    def close(self) -> None:
        """Finish the bag: write its index and metadata.yaml, and the CRCs of an MCAP file."""
        self._writer.close()
        if self._storage == 'mcap':  # rosbags writes none: fill them in as ros2 bag record does
            for path in self.path.glob('*.mcap'):
                write_crcs(path)

    def add_topic(self, topic: str, msgtype: str) -> None:
        """Declare ``topic`` with type ``msgtype`` (a type of the replay type store)."""
        if topic in self._connections:
            raise BagError(f'topic {topic!r} already added to {self.path}')
        self._connections[topic] = self._writer.add_connection(
            topic, msgtype, typestore=self._store
        )

    def write(self, topic: str, log_ns: int, message: Any) -> None:
        """Serialise ``message`` (CDR) and write it on ``topic`` at log time ``log_ns``."""
        self.write_raw(topic, log_ns, self._store.serialize_cdr(message, message.__msgtype__))

    def write_raw(self, topic: str, log_ns: int, data: bytes) -> None:
        """Write already serialised CDR ``data`` on ``topic`` at log time ``log_ns``."""
        self._writer.write(self._connections[topic], int(log_ns), data)
