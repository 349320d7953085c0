"""The payload digest: SHA-1 in base32, ``sha1:<32 letters>``.

One function for the WARC writer's ``WARC-Payload-Digest`` and the record's
``digest`` field, so a user comparing a record with its WARC capture (or two
crawls with ``jq``) compares the very same string.
"""

from __future__ import annotations

import hashlib
from typing import Final

# base32 of a SHA-1 (160 bits = 32 characters), ten bits at a time: the standard
# library's b32encode is pure Python and twice as slow.
_B32_PAIRS: Final = [
    a + b for a in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567" for b in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
]
_B32_SHIFTS: Final = tuple(range(150, -1, -10))


def b32(digest: bytes) -> str:
    """Base32 (RFC 4648 alphabet, no padding) of a 20-byte digest."""
    n = int.from_bytes(digest, "big")
    pairs = _B32_PAIRS
    return "".join([pairs[(n >> shift) & 1023] for shift in _B32_SHIFTS])


def sha1_digest(*parts: bytes) -> str:
    """A ``sha1:<base32>`` digest of the parts, as WARC-*-Digest fields carry it."""
    h = hashlib.sha1()
    for part in parts:
        h.update(part)
    return "sha1:" + b32(h.digest())
