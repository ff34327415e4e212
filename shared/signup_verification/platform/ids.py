"""Time-ordered identifiers (UUID version 7, RFC 9562) for rows that are inserted by the million.

A random (version 4) primary key sends every insert to a random leaf page of each index that leads
with it (verifications' primary key, the intents' per-verification index, create_events' key): a
page written anew, and a full-page image in the WAL for each one touched first after a checkpoint.
Version 7 puts a 48-bit millisecond timestamp first, so new rows land on the rightmost pages. 74 bits
stay random, so an id is still not guessable (it grants nothing alone: a code is needed too), and
the creation time it reveals is in the create answer anyway.
"""

from __future__ import annotations

import os
import time
import uuid

_RAND_B = (1 << 62) - 1


def uuid7() -> uuid.UUID:
    millis = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")  # 80 bits, of which 12 (rand_a) + 62 (rand_b) are used
    value = (millis & ((1 << 48) - 1)) << 80  # unix_ts_ms
    value |= 0x7 << 76  # version
    value |= ((rand >> 64) & 0xFFF) << 64  # rand_a
    value |= 0b10 << 62  # variant (RFC 9562)
    value |= rand & _RAND_B  # rand_b
    return uuid.UUID(int=value)
