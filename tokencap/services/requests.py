"""`OpenRequest`: the Run page's request to open one rollout on the Rollout page.

The Run page (a table row, previous / next, a joined row of a comparison) and a link
(`rollout_page.run_request_of_link`) make one; the Rollout page reads it from the session
(`tokencap/app/state.py`, ``Keys.OPEN_ROLLOUT``). A plain value and a leaf of the views: no Streamlit,
nothing from the views' rooms (``origin`` is a `run.source.RunOrigin`, ``comparison`` a
`run.compare.Comparison`, typed loosely here so the run room's modules can use this one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def _copied(params: Mapping[str, str] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (params or {}).items()}


@dataclass(frozen=True)
class OpenRequest:
    """One rollout to open, and where it came from.

    ``path`` is the run's directory, or the rollout's file when the run is one file; None when
    the rollout lives in an uploaded file (``name``, ``data``). ``source`` is the row's source
    relative to ``path`` (``sub/R.tokens.*`` for a store rollout). ``seq`` is new at every
    opening (the Rollout page selects the rollout once per seq). ``back_params`` are the
    ``run_*`` query parameters of the filters, to return with. ``final_responses`` names the
    rollout records the run was scanned with, so the rollout's verdict is its row's. ``vs`` is
    the other run's capture of a joined row (the Compare tab shows both). ``frame``, ``row``,
    ``origin`` place the row in its run (previous / next, the way back); for a joined row of a
    comparison ``comparison`` (``row`` a position in its joined rows) and ``origin_b`` instead
    of ``frame``; ``run`` and ``side`` name the run a capture comes from ("A (run)", "A").
    """

    path: str | None
    source: str
    rollout_id: str
    seq: int = 0
    back_params: Mapping[str, str] = field(default_factory=dict)
    name: str | None = None
    data: bytes | None = field(default=None, repr=False)
    final_responses: str | None = None
    vs: OpenRequest | None = None
    run: str | None = None
    side: str | None = None
    row: int | None = None
    # the run's objects a request carries for previous / next: compared by identity, not value
    frame: pd.DataFrame | None = field(default=None, repr=False, compare=False)
    origin: Any = field(default=None, repr=False, compare=False)
    comparison: Any = field(default=None, repr=False, compare=False)
    origin_b: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "back_params", _copied(self.back_params))

    def __hash__(self) -> int:
        return hash((self.path, self.source, self.rollout_id, self.seq, tuple(sorted(self.back_params.items())),
                     self.name, self.final_responses, self.vs, self.run, self.side, self.row))

    @property
    def uploaded(self) -> bool:
        """Whether the rollout lives in an uploaded file (``data``), which no path or URL names."""
        return self.data is not None

    @property
    def placed(self) -> bool:
        """Whether the request knows its place in a run (previous / next walk from it)."""
        return self.frame is not None or self.comparison is not None


def is_open_request(value: Any) -> bool:
    """Whether ``value`` is a request (what the session holds under ``Keys.OPEN_ROLLOUT``)."""
    return isinstance(value, OpenRequest)


__all__ = ["OpenRequest", "is_open_request"]
