# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Read and write rosbag2 files (mcap and sqlite3) with rosbags, with clear errors on bad bags."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rosbags.interfaces import Connection
from rosbags.rosbag2 import Reader, StoragePlugin, Writer, WriterError
from rosbags.typesys.store import Typestore

from dreamzero_ros.replay.bag_types import DefinitionError, connection_typestore
from dreamzero_ros.replay.typestore import replay_typestore

#: rosbag2 storage plugin names, as ``ros2 bag record -s`` spells them.
STORAGES = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}


class BagError(ValueError):
    """A bag cannot be used: missing, corrupt, truncated, or without the topics asked for."""


class BagReader:
    """A rosbag2 opened for reading; use as a context manager.

    Only the connections of the topics read are decoded: each with the bag's own definition of
    its type (the replay type store where the bag has none, see :mod:`.bag_types`), so a topic
    whose definition cannot be parsed is an error only when it is read.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise BagError(f'bag {self.path} does not exist')
        try:
            self._reader = Reader(self.path)
            self._reader.open()
        except Exception as error:  # storage backends (mcap, sqlite/apsw, yaml) raise many types
            raise BagError(f'cannot open bag {self.path}: {error}') from error
        self._stores: dict[int, Typestore] = {}

    def __enter__(self) -> BagReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the underlying storage."""
        self._reader.close()

    @property
    def topics(self) -> dict[str, str]:
        """Topic -> message type name (``pkg/msg/Type``)."""
        return {c.topic: c.msgtype for c in self._reader.connections}

    @property
    def start_ns(self) -> int:
        """Log time of the first message, ns."""
        return int(self._reader.start_time)

    @property
    def end_ns(self) -> int:
        """Log time just past the last message, ns."""
        return int(self._reader.end_time)

    def message_count(self, topic: str) -> int:
        """Number of messages the bag's index lists on ``topic``."""
        return sum(c.msgcount for c in self._reader.connections if c.topic == topic)

    def require(self, topic: str, msgtypes: Sequence[str], role: str) -> str:
        """Check that ``topic`` exists with one of ``msgtypes``; return its type.

        Raises:
            BagError: naming the role, the topic and what the bag holds instead.

        """
        topics = self.topics
        if topic not in topics:
            listing = ', '.join(f'{name} [{kind}]' for name, kind in sorted(topics.items()))
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
            raise BagError(f'{role} topic {topic!r} in bag {self.path} has no messages')
        return topics[topic]

    def first_log_ns(self, topic: str) -> int:
        """Log time of the first message on ``topic``."""
        for _, log_ns, _ in self.messages([topic]):
            return log_ns
        raise BagError(f'topic {topic!r} in bag {self.path} has no messages')

    def messages(
        self, topics: Sequence[str], start_ns: int | None = None, stop_ns: int | None = None
    ) -> Iterator[tuple[str, int, Any]]:
        """Yield ``(topic, log_time_ns, message)`` in log-time order, deserialised.

        Raises:
            BagError: where a message cannot be read or deserialised (corrupt or truncated bag).

        """
        return self._iterate(topics, start_ns, stop_ns, deserialize=True)

    def raw_messages(self, topics: Sequence[str]) -> Iterator[tuple[str, int, bytes]]:
        """Yield ``(topic, log_time_ns, serialised CDR bytes)`` in log-time order."""
        return self._iterate(topics, None, None, deserialize=False)

    def _iterate(
        self, topics: Sequence[str], start_ns: int | None, stop_ns: int | None, deserialize: bool
    ) -> Iterator[tuple[str, int, Any]]:
        connections = [c for c in self._reader.connections if c.topic in set(topics)]
        if not connections:
            return
        if deserialize:
            for connection in connections:
                self._typestore(connection)
        iterator = self._reader.messages(connections=connections, start=start_ns, stop=stop_ns)
        while True:
            try:
                connection, log_ns, raw = next(iterator)
                message = (
                    self._stores[connection.id].deserialize_cdr(raw, connection.msgtype)
                    if deserialize
                    else bytes(raw)
                )
            except StopIteration:
                return
            except Exception as error:  # any failure of storage or deserialisation
                raise BagError(f'bag {self.path} is corrupt or truncated: {error!r}') from error
            yield connection.topic, int(log_ns), message

    def _typestore(self, connection: Connection) -> Typestore:
        """The type store decoding ``connection``, parsed from the bag on first use."""
        if connection.id not in self._stores:
            try:
                self._stores[connection.id] = connection_typestore(
                    connection.msgtype, connection.msgdef, connection.digest
                )
            except DefinitionError as error:
                raise BagError(
                    f'topic {connection.topic!r} in bag {self.path} cannot be decoded: {error}'
                ) from error
        return self._stores[connection.id]


class BagWriter:
    """A new rosbag2 (version 9) for writing rosbags message objects; use as a context manager."""

    def __init__(self, path: str | Path, storage: str = 'mcap') -> None:
        if storage not in STORAGES:
            raise BagError(f'unknown storage {storage!r}; choose one of {sorted(STORAGES)}')
        self.path = Path(path)
        if self.path.exists():
            raise BagError(f'{self.path} exists; rosbag2 writes a new folder')
        self._store = replay_typestore()
        self._writer = Writer(self.path, version=9, storage_plugin=STORAGES[storage])
        self._connections: dict[str, Any] = {}
        try:
            self._writer.open()
        except WriterError as error:
            raise BagError(f'cannot create bag {self.path}: {error}') from error

    def __enter__(self) -> BagWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Finish the bag: write its index and metadata.yaml."""
        self._writer.close()

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
