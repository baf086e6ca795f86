"""What a Streamlit widget's state holds, read as plain data (the pages keep the states;
nothing here imports Streamlit). This module imports nothing else from `tokencap.views`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def selected_rows(state: Any) -> tuple[int, ...]:
    """The row positions a table's selection state holds (Streamlit's ``{"selection": {"rows": [...]}}``,
    as a mapping or with attributes); () for no state or anything else."""
    selection = state.get("selection") if isinstance(state, Mapping) else getattr(state, "selection", None)
    rows = selection.get("rows") if isinstance(selection, Mapping) else getattr(selection, "rows", None)
    if not isinstance(rows, (list, tuple)):
        return ()
    return tuple(r for r in rows if isinstance(r, int) and not isinstance(r, bool))


__all__ = ["selected_rows"]
