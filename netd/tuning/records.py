"""The journal's record format: checksummed, length-delimited lines.

One record is one line ``<length> <crc32> <json>\\n``: the byte length of the JSON payload in decimal,
its CRC-32 in 8 hex digits, the payload (compact JSON, no newline inside). A reader therefore knows,
for every line, whether it is whole and intact:

* a last line without its newline is a **torn tail** (a crash or a full disk cut an append short);
* a line whose length or checksum does not match, or whose payload is not a JSON object, is
  **corrupt** (damage after the fact).

Both are reported and skipped; every record before (and after) them is kept. The text stays
greppable: the payload is plain JSON.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Parsed", "frame", "parse", "unframe"]


def frame(record: dict[str, Any]) -> bytes:
    payload = json.dumps(record, separators=(",", ":"), sort_keys=True).encode()
    return b"%d %08x " % (len(payload), zlib.crc32(payload)) + payload + b"\n"


def unframe(line: bytes) -> dict[str, Any]:
    """The record of one whole line (without its newline); ValueError says what is wrong with it."""
    try:
        length_text, crc_text, payload = line.split(b" ", 2)
        length, crc = int(length_text), int(crc_text, 16)
    except ValueError:
        raise ValueError("no <length> <crc32> header") from None
    if len(payload) != length:
        raise ValueError(f"payload is {len(payload)} bytes, the header says {length}")
    if zlib.crc32(payload) != crc:
        raise ValueError("checksum mismatch")
    record = json.loads(payload)
    if not isinstance(record, dict):
        raise ValueError("payload is not a JSON object")
    return record


@dataclass
class Parsed:
    records: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    whole: int = 0  # bytes up to the end of the last whole line (where the next append goes)


def parse(data: bytes, name: str) -> Parsed:
    out = Parsed()
    offset, line_no = 0, 0
    while offset < len(data):
        end = data.find(b"\n", offset)
        line_no += 1
        if end < 0:
            out.problems.append(
                f"{name}: torn tail at byte {offset} ({len(data) - offset} bytes without a newline), skipped"
            )
            break
        try:
            out.records.append(unframe(data[offset:end]))
        except ValueError as exc:
            out.problems.append(f"{name}: record {line_no} at byte {offset} is corrupt ({exc}), skipped")
        offset = out.whole = end + 1
    return out
