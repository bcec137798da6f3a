# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What of a bag is damaged or unreadable, and which messages replay skipped because of it."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ['DamagedPart', 'IntegrityReport']

#: Skip reasons: a message in an MCAP chunk whose CRC or records do not check, a payload that
#: does not decode as its type (a flipped or truncated CDR payload, a truncated database row).
DAMAGED_CHUNK = 'damaged_chunk'
UNDECODABLE = 'undecodable'


@dataclass(frozen=True)
class DamagedPart:
    """A damaged or unreadable part of one storage file.

    Attributes:
        file: the storage file's name.
        part: where in it (``chunk at byte N``, ``summary``, ``database`` ...).
        reason: what is wrong.
        messages: topic -> messages held by the part; ``None`` where the file cannot tell.

    """

    file: str
    part: str
    reason: str
    messages: dict[str, int] | None

    def __str__(self) -> str:
        held = '' if self.messages is None else f' ({sum(self.messages.values())} messages)'
        return f'{self.file}: {self.part}: {self.reason}{held}'


@dataclass
class IntegrityReport:
    """The result of checking a bag: damaged parts, skipped messages, what could not be checked.

    Attributes:
        damaged: every damaged or unreadable part found.
        skipped: topic -> reason -> messages of the topics checked that replay skips.
        unverified_chunks: MCAP chunks written without a CRC (damage inside them shows only
            where a payload does not decode).

    """

    damaged: list[DamagedPart] = field(default_factory=list)
    skipped: dict[str, dict[str, int]] = field(default_factory=dict)
    unverified_chunks: int = 0

    @property
    def complete(self) -> bool:
        """Whether nothing was found damaged."""
        return not self.damaged and not self.skipped

    def skip(self, topic: str, reason: str, count: int = 1) -> None:
        """Count ``count`` skipped messages of ``topic`` for ``reason``."""
        reasons = self.skipped.setdefault(topic, {})
        reasons[reason] = reasons.get(reason, 0) + count

    def describe(self) -> str:
        """One line per damaged part and per skipped topic."""
        lines = [str(part) for part in self.damaged]
        lines += [
            f'{topic}: {count} messages skipped ({reason})'
            for topic, reasons in sorted(self.skipped.items())
            for reason, count in sorted(reasons.items())
        ]
        return '\n'.join(lines)

    def to_json(self) -> dict[str, object]:
        """The ``integrity`` entry of metrics.json."""
        return {
            'complete': self.complete,
            'damaged_parts': [
                {'file': p.file, 'part': p.part, 'reason': p.reason, 'messages': p.messages}
                for p in self.damaged
            ],
            'skipped_messages': {t: dict(r) for t, r in sorted(self.skipped.items())},
            'unverified_chunks': self.unverified_chunks,
        }
