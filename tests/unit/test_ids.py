"""platform/ids.uuid7: RFC 9562 version 7, time-ordered across milliseconds, random within one."""

from __future__ import annotations

import time
import uuid

from signup_verification.platform.ids import uuid7


def test_a_uuid7_is_version_7_of_the_rfc_variant_with_its_millisecond_first():
    before = time.time_ns() // 1_000_000
    value = uuid7()
    after = time.time_ns() // 1_000_000
    assert value.version == 7 and value.variant == uuid.RFC_4122
    assert before <= value.int >> 80 <= after
    assert uuid.UUID(str(value)) == value


def test_ids_of_later_milliseconds_sort_after_and_none_repeat():
    first = [uuid7() for _ in range(1000)]
    time.sleep(0.002)
    later = [uuid7() for _ in range(1000)]
    assert max(first) < min(later)
    assert len(set(first + later)) == 2000
    # 74 random bits: two ids of one millisecond differ beyond the timestamp and version
    same_ms = [u for u in first if u.int >> 80 == first[0].int >> 80]
    assert len({u.int & ((1 << 76) - 1) for u in same_ms}) == len(same_ms)
