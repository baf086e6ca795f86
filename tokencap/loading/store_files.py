"""The files of one capture-store rollout (docs/contract.md#input-store): their names, where a
rollout's siblings are, and reading them into its snapshot.

Per rollout ``R`` the store writes ``R.tokens.jsonl`` (records), ``R.tokens.intents``
(one call id per line, written before the call is served), ``R.tokens.state.json``,
``R.tokens.incomplete`` (a marker) and, in this project, ``R.tokens.refusals.jsonl``.

The rules that matter, each with its reason:
- Bytes after the last newline of a store ``.jsonl`` were never acknowledged by the
  writer, whatever they hold, so they are skipped (and noted) rather than parsed.
- An intent with neither an entry nor a refusal means a call was started and never
  captured: the rollout is incomplete, because the trajectory is missing a call.
- A rollout read from a zip (or from bytes) without the files that can say it is incomplete
  is masked: they may have been left behind.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from ..record_errors import type_name
from ..records import TokenCaptureSnapshot
from .entries_jsonl import build_snapshot, read_jsonl_records
from .files import DirectorySource, FileSource, Skipped, kind_of, printable
from .lines import iter_lines
from .problems import LoadError
from .raw_records import TOO_DEEP, decode_value

ENTRIES_SUFFIX = ".tokens.jsonl"
REFUSALS_SUFFIX = ".tokens.refusals.jsonl"
INTENTS_SUFFIX = ".tokens.intents"
STATE_SUFFIX = ".tokens.state.json"
INCOMPLETE_SUFFIX = ".tokens.incomplete"
_STORE_SUFFIXES = (REFUSALS_SUFFIX, STATE_SUFFIX, ENTRIES_SUFFIX, INTENTS_SUFFIX, INCOMPLETE_SUFFIX)

_LISTED = 10  # names shown in a note before "and N more"


@dataclass
class StoreRollout:
    """One store rollout's files, by their suffix."""

    rollout_id: str
    files: dict[str, str] = field(default_factory=dict)  # suffix -> file name


def store_file(name: str) -> tuple[str, str] | None:
    """(rollout id, store suffix) when ``name`` is one of a store rollout's files, else None."""
    for suffix in _STORE_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)], suffix
    return None


_SIBLING_WORDS = {
    REFUSALS_SUFFIX: "engine-refusals file (the rollout's refused requests, not its calls)",
    INTENTS_SUFFIX: "intents file (one call id a line, written before each call)",
    STATE_SUFFIX: "state file (the store's snapshot id, version and incomplete flag)",
    INCOMPLETE_SUFFIX: "incomplete marker",
}
COMPLETENESS_SUFFIXES = (INTENTS_SUFFIX, STATE_SUFFIX, INCOMPLETE_SUFFIX)
"""The store files that can say a rollout's capture is incomplete."""


def sibling_alone_message(label: str, rollout_id: str, suffix: str) -> str:
    """Why a store file other than the records file cannot be a source on its own."""
    return (f"{label}: this is the {_SIBLING_WORDS[suffix]} of capture-store rollout {rollout_id!r}; alone it "
            f"holds no calls to build. Give the store directory (or a zip of it), or {rollout_id}{ENTRIES_SUFFIX} "
            "(read with the rollout's other store files)")


def store_siblings(directory: str | os.PathLike[str], rollout_id: str
                   ) -> tuple[list[tuple[str, os.stat_result]], list[Skipped]]:
    """The store files of ``rollout_id`` in ``directory`` -- one ``lstat`` per possible name,
    no listing -- as the directory load sees them: regular files (with their stat), and
    the others (links, pipes, unexaminable) as `Skipped`, which fail the rollout there."""
    found: list[tuple[str, os.stat_result]] = []
    skipped: list[Skipped] = []
    for suffix in _STORE_SUFFIXES:
        name = rollout_id + suffix
        try:
            st = os.lstat(os.path.join(directory, name))
        except FileNotFoundError:
            continue
        except OSError as exc:
            skipped.append(Skipped(name, f"it cannot be examined ({exc.strerror or exc})"))
            continue
        if stat.S_ISREG(st.st_mode):
            found.append((name, st))
        else:
            skipped.append(Skipped(name, f"it is {kind_of(st.st_mode)}, not a regular file"))
    return found, skipped


def store_rollout_source(directory: Path, rollout_id: str) -> DirectorySource:
    """One store rollout's files in ``directory``, read exactly as loading the whole directory
    reads them (same label, same skipped entries): the source for one store file given alone."""
    found, skipped = store_siblings(directory, rollout_id)
    return DirectorySource.of_names(directory, [name for name, _ in found], printable(str(directory)), skipped)


def listing(items: list[str]) -> str:
    """``items`` joined with commas, the first few only, then "and N more"."""
    shown = ", ".join(items[:_LISTED])
    return shown + (f" and {len(items) - _LISTED} more" if len(items) > _LISTED else "")


def _read_state(source: FileSource, name: str) -> dict:
    try:
        state = decode_value(source.read(name))
    except RecursionError:
        raise LoadError(f"{name}: {TOO_DEEP}") from None
    except msgspec.DecodeError as exc:
        raise LoadError(f"{name}: not valid JSON ({exc})") from None
    except msgspec.ValidationError as exc:
        raise LoadError(f"{name}: a value cannot be read ({exc})") from None
    if not isinstance(state, dict):
        raise LoadError(f"{name}: the state file must hold a JSON object, got {type_name(state)}")
    for key, kind, words in (("snapshot_id", str, "a string"), ("version", int, "an integer"),
                             ("incomplete", bool, "true or false")):
        value = state.get(key)
        if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
            raise LoadError(f"{name}: field {key!r} must be {words}, got {type_name(value)}")
        if kind is int and isinstance(value, int) and not -(1 << 63) <= value < 1 << 63:
            raise LoadError(f"{name}: field {key!r} must fit in 64 bits")
    return state


def _read_intents(source: FileSource, name: str) -> list[str]:
    intents = []
    for _line, text in iter_lines(source.read(name)):
        try:
            call_id = bytes(text).decode("utf-8").strip()
        except UnicodeDecodeError:
            raise LoadError(f"{name}: not UTF-8 text (expected one call id per line)") from None
        if call_id:
            intents.append(call_id)
    return intents


def load_store_rollout(source: FileSource, rollout: StoreRollout) -> TokenCaptureSnapshot:
    """One store rollout's snapshot, read from its files: its state and marker (incomplete?), its records
    and refusals (its calls), and its intents (a call started and never captured makes it incomplete)."""
    rid, files = rollout.rollout_id, rollout.files
    notes: list[str] = []
    incomplete = False
    state: dict = {}
    if STATE_SUFFIX in files:
        name = files[STATE_SUFFIX]
        state = _read_state(source, name)
        if state.get("incomplete") is True:
            incomplete = True
            notes.append(f"{name}: the store marked this rollout incomplete")
    if INCOMPLETE_SUFFIX in files:
        incomplete = True
        notes.append(f"{files[INCOMPLETE_SUFFIX]}: incomplete marker present (a call failed to capture)")

    entry_raws: list = []
    refusal_raws: list = []
    for suffix, is_refusal in ((ENTRIES_SUFFIX, False), (REFUSALS_SUFFIX, True)):
        if suffix not in files:
            continue
        name = files[suffix]
        records = read_jsonl_records(source.lines(name, notes), name, refusals_only=is_refusal)
        strangers = [r for r in records.order if r != rid]
        if strangers:
            raise LoadError(f"{name}: records name rollout {strangers[0]!r}, but this file belongs to rollout {rid!r}")
        if records.order:
            entry_raws += records.entries[rid]
            refusal_raws += records.refusals[rid]

    where = files.get(ENTRIES_SUFFIX) or files.get(REFUSALS_SUFFIX) or rid
    snapshot_id, version = state.get("snapshot_id") or "", state.get("version") or 0
    if entry_raws or refusal_raws:
        snapshot = build_snapshot(rid, entry_raws, refusal_raws, where, snapshot_id=snapshot_id, version=version)
    else:
        snapshot = TokenCaptureSnapshot(rollout_id=rid, snapshot_id=snapshot_id, version=version)

    if INTENTS_SUFFIX in files:
        name = files[INTENTS_SUFFIX]
        intents = _read_intents(source, name)
        seen = {e.model_call_id for e in snapshot.entries} | {r.model_call_id for r in snapshot.engine_refusals}
        dangling = sorted({i for i in intents if i not in seen})
        if dangling:
            incomplete = True
            notes.append(f"{name}: {len(dangling)} dangling intent(s) with no captured entry or refusal "
                         f"(the call was started but never captured): {listing(dangling)}")
    if source.packed and not any(suffix in files for suffix in COMPLETENESS_SUFFIXES):
        incomplete = True
        notes.append(_without_siblings_note(source, where, rid))
    return TokenCaptureSnapshot(
        rollout_id=rid, entries=snapshot.entries, engine_refusals=snapshot.engine_refusals,
        snapshot_id=snapshot.snapshot_id, version=snapshot.version, incomplete=incomplete, source_notes=notes,
    )


WITHOUT_SIBLINGS = "was read without the other capture-store files"
"""The words of the note on a rollout whose store siblings could not be read (the app finds it by them)."""


def _without_siblings_note(source: FileSource, name: str, rid: str) -> str:
    """Why a rollout of a zip or of bytes with a store name is masked though nothing says a call
    failed: the files that would say so may have been left behind (DESIGN.md, "A store file is
    never read without its siblings")."""
    siblings = f"its {INTENTS_SUFFIX}, {STATE_SUFFIX}, {INCOMPLETE_SUFFIX}"
    unknown = "Whether a call failed to capture cannot be known: masked as capture_incomplete"
    if os.path.basename(source.label) == name:  # the file's bytes on their own (an upload)
        return (f"{name} {WITHOUT_SIBLINGS} of rollout {rid!r} ({siblings}). {unknown}. Give the store "
                "directory, or a zip of it")
    return (f"{source.label}: {name} {WITHOUT_SIBLINGS} of rollout {rid!r}: the zip holds none of {siblings} (the "
            f"store writes the first two for every rollout, so they were left out when zipping). {unknown}, though "
            "the same files in a directory read as complete. Open the store directory, or zip it with those files")


__all__ = ["COMPLETENESS_SUFFIXES", "ENTRIES_SUFFIX", "INCOMPLETE_SUFFIX", "INTENTS_SUFFIX", "REFUSALS_SUFFIX",
           "STATE_SUFFIX", "WITHOUT_SIBLINGS", "StoreRollout", "listing", "load_store_rollout", "sibling_alone_message",
           "store_file", "store_rollout_source", "store_siblings"]
