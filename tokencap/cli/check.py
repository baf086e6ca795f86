"""`tokencap check`: the pre-flight before training (docs/contract.md#command-line).

Each rollout of a source built one at a time, a line for each masked one (why), one summary line;
exit 1 when any rollout is masked.

The wording and the counts are `tokencap.checking`'s; this module reads the source as `build` and
`inspect` do and asks the diagnosis only about masked rollouts.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from .build import _inputs
from .options import _PROGRESS, EXIT_OK, _add_tokenizer, _UsageError

if TYPE_CHECKING:
    from ..progress import RunProgress

EXIT_MASKED = 1
"""At least one rollout is masked: a training job gated on `check` should not start."""

PROGRESS_EVERY = 10.0
"""Off a terminal (a CI log), a check that has run this many seconds says how far it is on
stderr, and again every as many seconds; on a terminal, one self-overwriting line does."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    cmd = sub.add_parser("check", help="pre-flight before training: say why each masked rollout is masked; "
                                       "exit 1 when any is")
    cmd.add_argument("source", help="rollouts JSONL with token ids on output items, snapshot JSON, entries JSONL, "
                                    "capture-store directory, or a zip of one")
    cmd.add_argument("--final-responses", metavar="FILE",
                     help="the harness's final responses (JSON or JSONL) beside a capture, to anchor each rollout on "
                          "its answer; not with a rollouts file (it is its own records)")
    _add_tokenizer(cmd)
    cmd.set_defaults(rollout=None, terminal_call_id=None)


def run(args: argparse.Namespace) -> int:
    from ..checking import CheckTally, masked_line
    from ..diagnosis import diagnose, load_tokenizer
    from ..loading.rollouts import from_output_items
    from ..rollout import build_rollout

    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else None  # a bad one fails before any work
    tally = CheckTally()
    out = _Lines()
    logged = _LoggedProgress()
    for n, (snapshot, final, evidence) in enumerate(_inputs(args, evidence=True), 1):
        _PROGRESS.say(f"tokencap: checking rollout {n} ({snapshot.rollout_id}) ...")
        logged(n)
        from_items = from_output_items(snapshot)
        result = build_rollout(snapshot, final_response=final, project=False)  # check prints no payload
        del snapshot, final  # one rollout in memory at a time
        breaks = diagnose(result, tokenizer=tokenizer, evidence=evidence) if result.mask_sample else []
        tally.add(result, breaks, from_items=from_items)
        if result.mask_sample:
            _PROGRESS.done()
            out.write(masked_line(result, breaks, from_items=from_items))
        del result, breaks, evidence
    _PROGRESS.done()
    if not tally.rollouts:  # a gate must not pass on nothing
        raise _UsageError(f"{args.source}: no rollout to check")
    out.write(tally.summary())
    out.flush()
    return EXIT_MASKED if tally.masked else EXIT_OK


class _Lines:
    """Standard output, line by line. When the reader goes away (`tokencap check RUN | head`),
    the check goes on without printing: its exit code still says whether a rollout is masked
    (a job gated with ``set -o pipefail`` must not start on a check cut short)."""

    def __init__(self) -> None:
        self.gone = False

    def write(self, line: str) -> None:
        if not self.gone:
            self._guarded(lambda: sys.stdout.write(line + "\n"))

    def flush(self) -> None:
        if not self.gone:
            self._guarded(sys.stdout.flush)

    def _guarded(self, act) -> None:
        try:
            act()
        except BrokenPipeError:
            from . import _quiet_stdout

            self.gone = True
            _quiet_stdout()


class _LoggedProgress:
    """How far a long check is, as plain lines on stderr when no terminal shows `_PROGRESS`'s
    line (`RunProgress`'s lines, as `scan` writes them), from `PROGRESS_EVERY` seconds on."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.progress: RunProgress | None = None
        self.off = _PROGRESS.enabled

    def __call__(self, done: int) -> None:
        if self.off or time.monotonic() - self.started < PROGRESS_EVERY:
            return
        if self.progress is None:
            from ..progress import RunProgress

            self.progress = RunProgress("tokencap check", unit=" rollouts", interactive=False,
                                        interval=PROGRESS_EVERY)
            self.progress.started = self.started
        self.progress(done, 0)
