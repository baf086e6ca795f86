"""What a record error says: the error that names the call and the field, and the words for
the value that is wrong.

Every message about a record or a file of records is built from these, so the same input
always gives the same message bytes, wherever it is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


class RecordError(ValueError):
    """A record that cannot be a record: names the call, the field and the problem.

    Loaders add where it came from (``source``: the file and line) so the message a user
    reads says exactly what to fix.
    """

    record_index: int | None = None
    """The failing record's position in the batch a decoder was given, when it knows it."""

    def __init__(self, problem: str, *, call_id: str | None = None, field: str | None = None,
                 source: str | None = None) -> None:
        self.problem = problem
        self.call_id = call_id
        self.field = field
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        parts = []
        if self.source:
            parts.append(self.source)
        if self.call_id is not None:
            parts.append(f"call {self.call_id!r}")
        if self.field:
            parts.append(f"field {self.field!r}")
        parts.append(self.problem)
        return ": ".join(parts)

    def located(self, source: str) -> RecordError:
        """The same error with where it came from prepended (file, line, record)."""
        if self.source:
            source = f"{source}: {self.source}"
        return RecordError(self.problem, call_id=self.call_id, field=self.field, source=source)


def type_name(value: Any) -> str:
    """What kind of JSON value ``value`` is, as a message says it ("an integer", "null")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple, np.ndarray)):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def shown(value: Any, limit: int = 60) -> str:
    """A value for an error message: deterministic, short, and never a memory address.

    JSON scalars are shown as written (long strings cut); anything else by its kind, so
    the same input always gives the same message bytes.
    """
    if value is None or isinstance(value, (bool, float, np.bool_, np.floating)):
        return repr(value.item() if isinstance(value, np.generic) else value)
    if isinstance(value, (int, np.integer)):
        value = int(value)
        return repr(value) if value.bit_length() <= 128 else f"an integer of {value.bit_length()} bits"
    if isinstance(value, str):
        text = repr(value)
        return text if len(text) <= limit else f"{text[: limit - 5]}...' ({len(value)} characters)"
    return type_name(value)
