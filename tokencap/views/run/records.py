"""Whether a run's rollout records were used: how many rollouts they apply to, in words.

A records file is matched to a run's rollouts by ``rollout_id`` (a record without one applies
only to a run of a single rollout). A file whose records name no rollout of the run adds
nothing -- no reward, no group, no terminal attribution -- and the page says so where it names
the records, instead of claiming the run was scanned "with" them and then advising to pass them.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc


def records_applied(table: pa.Table) -> int:
    """How many rows of a scan table a rollout record applied to (a terminal attribution, a reward or a
    task index: any of them is set only from a record)."""
    applied = None
    for column in ("terminal_attribution", "reward", "task_index"):
        if column in table.column_names:
            valid = table.column(column).is_valid()
            applied = valid if applied is None else pc.or_(applied, valid)
    return 0 if applied is None else int(pc.sum(applied).as_py() or 0)


def records_use_words(name: str, applied: int, total: int) -> str:
    """How the run's rollout records ``name`` were used, after the words naming them: nothing when they
    apply to every rollout; how many they apply to; or that none matched, and why."""
    if total == 0 or applied == total:
        return ""
    if applied == 0:
        return (f"; not used: no record in {name} names a rollout of this run (records are matched by rollout_id; "
                "one without a rollout_id applies only to a run of a single rollout)")
    return f" ({applied:,} of {total:,} rollouts have a record)"  # total > applied >= 1; one line on the page


def records_unused_hint(name: str) -> str:
    """What the rewards section says when records were given but none applies (not: "pass them")."""
    return (f"The rollout records {name} name no rollout of this run, so there are no rewards or groups to show. "
            "Records are matched by rollout_id: check that the file belongs to this run (one record a rollout, "
            "its rollout_id as the capture names the rollout).")


__all__ = ["records_applied", "records_unused_hint", "records_use_words"]
