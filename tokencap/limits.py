"""Every limit tokencap puts on its input, in one place (README "Limits", DESIGN.md).

Each limit bounds what a hostile or broken input can cost -- memory, time, or a crash at
write time -- and each one, when exceeded, is a one-line load error that names the file
(and member, line, call and field) and the limit. None of them is close to what a real
capture needs.
"""

from __future__ import annotations

MAX_ZIP_MEMBERS = 10_000
"""Files in one zip. A capture store holds five files per rollout at most."""

MAX_ZIP_EXPANDED_BYTES = 1 << 30
"""Uncompressed bytes of all the members of one zip together (1 GiB). The app's upload
limit is 256 MB; a real capture store zipped with deflate expands 3-10x, so this admits
any upload of a real store. A bigger store is read as a directory instead."""

MAX_ZIP_RATIO = 100
ZIP_RATIO_ALLOWANCE_BYTES = 16 << 20
"""A zip may expand to at most ``MAX_ZIP_RATIO`` times its own size, or to
``ZIP_RATIO_ALLOWANCE_BYTES`` (16 MiB) whatever its size. Token ids as JSON text compress
3-10x with deflate; a zip bomb of zeros or blank lines compresses about 1000x. So a
few-megabyte upload can never cost gigabytes."""

MAX_CARRIED_DEPTH = 64
"""Nesting levels inside one carried field (``output_items``, ``routed_experts``, an
unknown field). A Responses output item is nested a handful of levels; the JSON writer
stops at 255 levels, a deep copy at the interpreter's recursion limit, so a deeper value
would load, then fail at write time (or mask a valid sample as ``build_error``)."""

CARRIED_INT_MIN = -(1 << 63)
CARRIED_INT_MAX = (1 << 64) - 1
"""Integers a carried field may hold: the signed and unsigned 64-bit range, the range the
JSON writer (and every consumer that parses JSON into 64-bit integers) can represent."""

READ_WHOLE_BELOW = 8 << 20
"""A regular file smaller than this (8 MiB) is read into memory; a bigger one is
memory-mapped, so its pages cost nothing until they are parsed."""

HELD_AHEAD_BYTES = 256 << 20
"""Memory (estimated, 256 MiB) that rollouts loaded ahead of their turn may hold. A loose
file is loaded when its base name is due (a file that fails is reported under that name),
which for members named ``f{i}.json`` holding ``r{i}`` is long before its rollouts are
due. Its rollouts are kept until then while they fit in this budget; past it a file's
rollouts are dropped and the file is loaded again when they are due (twice the work,
never more memory)."""

__all__ = [
    "CARRIED_INT_MAX", "CARRIED_INT_MIN", "HELD_AHEAD_BYTES", "MAX_CARRIED_DEPTH", "MAX_ZIP_EXPANDED_BYTES",
    "MAX_ZIP_MEMBERS", "MAX_ZIP_RATIO", "READ_WHOLE_BELOW", "ZIP_RATIO_ALLOWANCE_BYTES",
]
