"""File digests: the one SHA-256 of a file's bytes that results, gradebooks and regrade fingerprints record."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: Path) -> str | None:
    """The SHA-256 of a file's bytes, or None if it cannot be read."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()
