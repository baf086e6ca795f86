"""Which tokencap wrote a table: the version and a digest of the code itself.

A scan table is reused (``--since``, the app's scan cache) only when the same tokencap
wrote it. The version number alone is not enough: it changes at releases, while a checkout
between releases can change a verdict (a fail-open fixed, a new mask reason). Reusing a row
written by older code would show — or export — a verdict that this code would not give, so
the identity also covers every source file of the package. Editing any of them makes every
earlier table stale, which costs one re-scan, never a wrong verdict.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

__version__ = "0.1.0"
"""The package version (also `tokencap.__version__`): kept here, in the bottom layer, so the
identity needs nothing from the package above it."""


def sources_digest(root: Path) -> str:
    """The first 16 hex digits of the SHA-256 of the Python sources under ``root`` (the
    relative path and bytes of each, in path order)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


@lru_cache(maxsize=1)
def code_identity() -> str:
    """``VERSION+DIGEST``: the package version and the digest of its sources."""
    return f"{__version__}+{sources_digest(Path(__file__).resolve().parent)}"
