"""A run as a plan of work (docs/contract.md#scan-table): what `scan` and `export` share before and while
they work it.

`plan_run` discovers the run (`discover`), keeps an earlier table's rows of unchanged sources
(``--since``) and cuts the other rollouts into shards; `ordered_results` works the shards on an
engine (`engines`) and gives every result back in the plan's order, so output is written in the
discovery order as shards come back. `RunSummary` is what a scan or export did, for its closing line.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..loading import final_responses_beside_rollouts
from ..loading.final_responses import FinalResponses
from .diagnosed import tokenizer_at
from .discover import RolloutUnit, discover
from .engines import run_shards
from .errors import DiscoveryError
from .reading import Previous, read_previous
from .work import RunOptions

Progress = Callable[[int, int], None]
"""``progress(rollouts_done, rollouts_total)``, called as shards complete."""

MAX_SHARD_UNITS = 32
MAX_SHARD_BYTES = 64 << 20


@dataclass
class RunSummary:
    """What a scan or export did, for the closing line a person reads."""

    rollouts: int = 0
    trainable: int = 0
    reused: int = 0
    written: int = 0
    notes: list[str] = field(default_factory=list)


def cut_shards(units: list[RolloutUnit], workers: int) -> list[list[RolloutUnit]]:
    """Consecutive units cut into shards: big enough to amortise a task, small enough to balance."""
    if not units:
        return []
    per_shard = max(1, min(MAX_SHARD_UNITS, math.ceil(len(units) / (16 * max(1, workers)))))
    shards: list[list[RolloutUnit]] = []
    current: list[RolloutUnit] = []
    size = 0
    for unit in units:
        if current and (len(current) >= per_shard or size + unit.size > MAX_SHARD_BYTES):
            shards.append(current)
            current, size = [], 0
        current.append(unit)
        size += unit.size
    shards.append(current)
    return shards


def check_tokenizer(tokenizer: str | os.PathLike[str] | None) -> str | None:
    """The ``tokenizer.json`` that ``tokenizer`` (a file, a model directory or ``Org/Name`` in the local
    Hugging Face cache, docs/contract.md#tokenizers) names, read once here so a bad one fails before any work starts
    (`tokencap.diagnosis.TokenizerError`, one line); None for none."""
    if tokenizer is None:
        return None
    found = tokenizer_at(os.fspath(tokenizer))
    return str(getattr(found, "path", os.fspath(tokenizer)))  # the tokenizer.json a directory or model name gives


def rollout_records(path: str | FinalResponses | None) -> Any:
    """The rollout records at ``path``; records a caller has read already (to blame their errors on
    its own flag, say) are used as they are."""
    if not path:
        return None
    if isinstance(path, FinalResponses):
        return path
    from ..loading import load_final_responses  # terminal attribution (docs/contract.md#attribution)

    return load_final_responses(path)


def plan_run(source: str | os.PathLike[str], since: str | None, final_responses: str | FinalResponses | None,
             workers: int, summary: RunSummary, tokenizer: str | None = None
             ) -> tuple[list[Any], Previous | None, int, bool]:
    """The run as an ordered plan of shards (lists of units) and reused sources (str)."""
    previous = None
    if since:
        assert not isinstance(final_responses, FinalResponses)  # scan_batches refuses records read with since
        previous = read_previous(since, final_responses, summary.notes, tokenizer)
    skipped: list[str] = []
    units = discover(source, keep=previous.keep if previous else (lambda s, b, m: True), skipped=skipped,
                     notes=summary.notes)
    if final_responses and any(unit.kind == "rollouts" for unit in units):
        raise DiscoveryError(final_responses_beside_rollouts(str(getattr(final_responses, "name", final_responses))))
    if skipped:
        shown = ", ".join(skipped[:5]) + (f" and {len(skipped) - 5} more" if len(skipped) > 5 else "")
        summary.notes.append(f"skipped {len(skipped)} entr{'y' if len(skipped) == 1 else 'ies'} that "
                             f"{'is' if len(skipped) == 1 else 'are'} not a regular file or directory "
                             f"(symlinks, pipes, devices are never read): {shown}")
    if not units and since is None:
        # A run with nothing to scan is a mistake, as `tokencap build` says of it, not an empty
        # table (with --since it is a run whose files all went away since the earlier scan).
        raise _nothing_to_scan(source, summary.notes[-1] if skipped else "")
    plan: list[Any] = []
    fresh: list[RolloutUnit] = []
    total = 0

    def flush() -> None:
        plan.extend(cut_shards(fresh, workers))
        fresh.clear()

    for unit in units:
        if unit.kind == "reused":
            flush()
            plan.append(unit.source)
            count = previous.spans[unit.source][3] if previous else 0
            total += count
            summary.reused += count
        else:
            fresh.append(unit)
            total += 1
    flush()
    single = len(units) == 1 and units[0].kind != "reused"
    return plan, previous, total, single


def _nothing_to_scan(source: str | os.PathLike[str], skipped_note: str) -> DiscoveryError:
    """The error for a run without a rollout: the loader's words (those `tokencap build` prints)
    when it finds nothing either, else what the scan skipped."""
    from ..loading import LoadError, iter_snapshots

    try:
        next(iter(iter_snapshots(source)), None)
    except LoadError as exc:
        return DiscoveryError(str(exc))
    return DiscoveryError(f"{source}: no rollout to scan; {skipped_note or 'nothing in it can be read'}")


def ordered_results(fn: Callable, plan: list[Any], options: RunOptions, engine: str, workers: int,
                    ray_address: str | None) -> Iterator[tuple[str, Any]]:
    """Each item of ``plan`` in order: ("reused", source) for an earlier table's rows, ("built", result)
    for a shard, which ``fn`` works on the engine."""
    shards = [item for item in plan if not isinstance(item, str)]
    results = run_shards(fn, iter(shards), (options,), engine=engine, workers=workers, ray_address=ray_address)
    try:
        for item in plan:
            if isinstance(item, str):
                yield "reused", item
            else:
                yield "built", next(results)
    finally:
        results.close()


__all__ = ["MAX_SHARD_BYTES", "MAX_SHARD_UNITS", "Progress", "RunSummary", "check_tokenizer", "cut_shards",
           "ordered_results", "plan_run", "rollout_records"]
