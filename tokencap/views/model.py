"""`RolloutView`: one rollout built once (per anchor), with everything the page derives from it.

The app caches one `RolloutView` per (source content, rollout, anchor); the derived pieces
(call roles, loss masks per chain, and whatever a page part memoises through `derived`:
the tree layout, the verdict banner, the culprits) are computed on first use and kept on
the object, so switching tabs, selecting calls or paging a loss mask never rebuilds
anything.

This module is the bottom of `tokencap.views`: it imports no other module of the package,
and every page part (tree, detail, mask, verdicts, export, ...) builds on it. The node
keys of the call tree (``call:ID``, ``refusal:ID``, ``ghost:ID``) live here because both
the tree and the detail panel speak them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from functools import cached_property
from typing import Any, TypeVar

from ..builder import BuildOutput, Chain
from ..diagnosis import Break, diagnose
from ..lossmask import LossMask, loss_mask
from ..records import EngineRefusalRecord, TokenCaptureSnapshot, TokenEntry
from ..report import call_roles
from ..rollout import RolloutResult, build_rollout

T = TypeVar("T")

CALL, REFUSAL, GHOST = "call", "refusal", "ghost"
"""Kinds of call-tree node: a captured call, an engine refusal, a call that was never captured."""


def node_key(kind: str, ident: str) -> str:
    """The key of a call-tree node: ``call:ID``, ``refusal:ID`` or ``ghost:ID``."""
    return f"{kind}:{ident}"


def split_key(key: str) -> tuple[str, str]:
    kind, _, ident = key.partition(":")
    return kind, ident


DANGLING_MARK = "dangling intent"


def dangling_intents(notes: Iterable[str]) -> list[str]:
    """Call ids a capture store announced (an intent line) but never captured, from the loader's notes.

    docs/contract.md#input-store puts those ids in ``source_notes``, as the list after the last ``": "`` of
    the note that says "dangling intent"; ids in the order the note gives them, once each.
    """
    out: list[str] = []
    for note in notes:
        if DANGLING_MARK not in note or ": " not in note:
            continue
        for ident in note.rsplit(": ", 1)[1].split(", "):
            ident = ident.strip()
            if ident and ident not in out:
                out.append(ident)
    return out


class RolloutView:
    """A built rollout and its derived views. Thread-safe enough for Streamlit's shared caches:
    derived values are pure, so a race at worst computes one twice."""

    def __init__(self, snapshot: TokenCaptureSnapshot, anchor: str | None = None,
                 result: RolloutResult | None = None, final_response: dict | None = None,
                 evidence: dict | None = None) -> None:
        self.snapshot = snapshot
        self.anchor = anchor
        self.final_response = final_response
        """The harness's final response this view was built with (docs/contract.md#attribution), if any."""
        self.evidence = evidence
        """The rollout record's evidence (`FinalResponses.evidence_for`, docs/contract.md#evidence): read by the
        diagnosis
        only, never by the build."""
        self.result = result if result is not None else build_rollout(snapshot, terminal_call_id=anchor,
                                                                      final_response=final_response)
        self._masks: dict[str, LossMask] = {}
        self._derived: dict[str, Any] = {}
        self._lock = threading.Lock()

    # -- plain facts -------------------------------------------------------------------

    @property
    def rollout_id(self) -> str:
        return self.result.rollout_id

    @property
    def build(self) -> BuildOutput | None:
        return self.result.build

    @property
    def chains(self) -> list[Chain]:
        return list(self.build.chains) if self.build is not None else []

    def chain(self, chain_id: str) -> Chain | None:
        return self.build.chain(chain_id) if self.build is not None else None

    @cached_property
    def roles(self) -> dict[str, str]:
        """Call id -> main / branch / quarantined / after_terminal."""
        return call_roles(self.build) if self.build is not None else {}

    @cached_property
    def chain_membership(self) -> dict[str, list[str]]:
        """Call id -> ids of the chains it lies on (main first)."""
        out: dict[str, list[str]] = {}
        for chain in self.chains:
            for cid in chain.call_ids:
                out.setdefault(cid, []).append(chain.chain_id)
        return out

    @cached_property
    def records_by_id(self) -> dict[str, TokenEntry]:
        """The snapshot's records by call id (first copy), including ones the build excluded."""
        out: dict[str, TokenEntry] = {}
        for e in self.snapshot.entries:
            out.setdefault(e.model_call_id, e)
        return out

    @cached_property
    def copies_by_id(self) -> dict[str, list[TokenEntry]]:
        out: dict[str, list[TokenEntry]] = {}
        for e in self.snapshot.entries:
            out.setdefault(e.model_call_id, []).append(e)
        return out

    @cached_property
    def refusals_by_id(self) -> dict[str, EngineRefusalRecord]:
        return {r.model_call_id: r for r in self.snapshot.engine_refusals}

    @cached_property
    def announced_uncaptured(self) -> list[str]:
        """Calls the store announced but never captured (they make the capture incomplete)."""
        captured = set(self.records_by_id) | set(self.refusals_by_id)
        return [c for c in dangling_intents(self.snapshot.source_notes) if c not in captured]

    @cached_property
    def breaks(self) -> list[Break]:
        """Where the rollout's lineage breaks and why (`tokencap.diagnose`, docs/contract.md#diagnosis), with the view's
        evidence; none for a rollout that was not built. Computed on first use."""
        return diagnose(self.result, evidence=self.evidence) if self.build is not None else []

    @cached_property
    def origin_time(self) -> float | None:
        times = [e.created_at for e in self.snapshot.entries]
        return min(times) if times else None

    @property
    def terminal_call_id(self) -> str | None:
        """The delivered chain's last call."""
        main = self.build.main if self.build is not None else None
        return main.links[-1].call_id if main is not None and main.links else None

    def entry(self, call_id: str) -> TokenEntry | None:
        """The full-prompt entry the build used, else the raw record (excluded calls)."""
        if self.build is not None and call_id in self.build.entries:
            return self.build.entries[call_id]
        return self.records_by_id.get(call_id)

    # -- derived views -----------------------------------------------------------------

    def derived(self, name: str, compute: Callable[[RolloutView], T]) -> T:
        """``compute(self)``, computed once per view and kept under ``name``.

        Page parts memoise what they derive from a view here (``tree.tree_of`` keeps the
        layout, ``verdicts.banner_of`` the banner), so this module needs to know none of them.
        """
        with self._lock:
            if name in self._derived:
                return self._derived[name]
        value = compute(self)
        with self._lock:
            return self._derived.setdefault(name, value)

    def has_derived(self, name: str) -> bool:
        """Whether ``derived(name, ...)`` has been computed for this view."""
        with self._lock:
            return name in self._derived

    def mask(self, chain_id: str = "main") -> LossMask | None:
        with self._lock:
            cached = self._masks.get(chain_id)
        if cached is not None:
            return cached
        chain = self.chain(chain_id)
        if chain is None:
            return None
        computed = loss_mask(chain)
        with self._lock:
            self._masks.setdefault(chain_id, computed)
        return computed

    def anchor_options(self) -> list[str]:
        """Call ids one may anchor on: main chain first (in order), then other chained calls by time."""
        if self.build is None:
            return []
        main = self.build.main
        first = list(main.call_ids) if main is not None else []
        seen = set(first)
        rest = sorted((cid for cid in self.build.entries if cid not in seen),
                      key=lambda c: (self.build.entries[c].created_at, c))  # type: ignore[union-attr]
        return first + rest
