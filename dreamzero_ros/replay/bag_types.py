# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Type stores for a bag's connections, built from the bag's own definitions, one at a time.

A bag carries the definition of each message type it holds (``ros2msg`` or ``ros2idl`` text);
replay parses only the definitions of the topics it reads, so that a connection whose definition
cannot be parsed (a custom type, a damaged schema) costs only that topic. Where a bag carries no
definition (older rosbag2 files), the replay type store (ROS 2 Kilted plus the package's
messages) decodes the types it knows.
"""

from __future__ import annotations

from rosbags.interfaces import MessageDefinition, MessageDefinitionFormat
from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from dreamzero_ros.errors import DefinitionError
from dreamzero_ros.replay.typestore import replay_typestore

__all__ = ['connection_typestore']

#: rosbag2 joins the IDL files of a type and its dependencies with this line and an IDL header.
_IDL_SEPARATOR = '=' * 80 + '\n'


def _parse(msgtype: str, definition: MessageDefinition) -> dict:
    if definition.format == MessageDefinitionFormat.MSG:
        return get_types_from_msg(definition.data, msgtype)
    text = definition.data
    if not text.startswith(_IDL_SEPARATOR + 'IDL: '):
        return get_types_from_idl(text)
    types: dict = {}
    for section in text.split(_IDL_SEPARATOR)[1:]:
        types.update(get_types_from_idl(section.partition('\n')[2]))
    return types


def connection_typestore(msgtype: str, definition: MessageDefinition, digest: str) -> Typestore:
    """A type store that decodes ``msgtype`` as the bag defines it.

    Args:
        msgtype: ``pkg/msg/Type``.
        definition: the bag's definition of the type (format ``NONE`` where it has none).
        digest: the bag's type hash (``RIHS01_...``), checked against the definition; other
            values (older bags) are not checked.

    Raises:
        DefinitionError: naming the type and what is wrong with its definition.

    """
    if definition.format == MessageDefinitionFormat.NONE:
        store = replay_typestore()
        if msgtype not in store.types:
            raise DefinitionError(f'the bag has no definition of {msgtype}, an unknown type')
        return store
    store = get_typestore(Stores.EMPTY)
    try:
        store.register(_parse(msgtype, definition))
        known = msgtype in store.types
        matches = not digest.startswith('RIHS01_') or store.hash_rihs01(msgtype) == digest
    except Exception as error:  # the parser and the code generator raise many types
        raise DefinitionError(
            f'the definition of {msgtype} in the bag cannot be parsed: {error}'
        ) from error
    if not known:
        raise DefinitionError(f'the definition of {msgtype} in the bag does not define it')
    if not matches:
        raise DefinitionError(f'the definition of {msgtype} in the bag does not match its hash')
    return store
