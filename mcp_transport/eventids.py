"""The SSE event id: `<stream id>-<seq>`, unique in the session and ordered within its stream.

A client sends it back as `Last-Event-ID`; the admin searches by it. Written and read only here.
"""
from __future__ import annotations

import re

_DIGITS = re.compile(r"[0-9]+")
MAX_LENGTH = 40


def format_event_id(stream_id: int, seq: int) -> str:
    return f"{stream_id}-{seq}"


def format_event_ids(stream_id: int, seqs) -> list[str]:
    """format_event_id for a replay's many events, in one comprehension."""
    return [f"{stream_id}-{seq}" for seq in seqs]


def parse_event_id(value: str) -> tuple[int, int] | None:
    """`<stream>-<seq>` -> (stream, seq); anything else -> None."""
    stream, sep, seq = value.partition("-")
    if not sep or len(value) > MAX_LENGTH or not (_DIGITS.fullmatch(stream) and _DIGITS.fullmatch(seq)):
        return None
    return int(stream), int(seq)
