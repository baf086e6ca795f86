"""Progress on stderr for long command-line work (run scans and exports).

On a terminal: a tqdm bar (rollouts done, rate, time left). Anywhere else (a CI log, a
batch job's captured stderr): a plain line every `PLAIN_INTERVAL` seconds and one at the
end, formatted by tqdm too, because carriage-return redraws turn a log file into noise.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from tqdm import tqdm

PLAIN_INTERVAL = 10.0


class RunProgress:
    """A ``progress(done, total)`` callable; `close()` when the work is over (or stopped)."""

    def __init__(self, label: str, unit: str = "rollout", stream: TextIO | None = None,
                 interactive: bool | None = None, interval: float = PLAIN_INTERVAL) -> None:
        self.stream = stream or sys.stderr
        self.label = label
        self.unit = unit
        self.interactive = self.stream.isatty() if interactive is None else interactive
        self.interval = interval
        self.started = time.monotonic()
        self.last_line = 0.0
        self.done = 0
        self.total = 0
        self.bar: tqdm | None = None
        self.closed = False

    def __call__(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        if self.interactive:
            if self.bar is None:
                self.bar = tqdm(total=total, desc=self.label, unit=self.unit, file=self.stream,
                                dynamic_ncols=True, smoothing=0.1)
            if self.bar.total != total:
                self.bar.total = total
            self.bar.update(done - self.bar.n)
            return
        now = time.monotonic()
        if now - self.last_line >= self.interval:
            self._line(now)

    def _line(self, now: float, ending: str = "") -> None:
        self.last_line = now
        text = tqdm.format_meter(self.done, self.total or None, now - self.started, prefix=self.label,
                                 unit=self.unit, ncols=0)
        self.stream.write(text.strip() + (f" {ending}" if ending else "") + "\n")
        self.stream.flush()

    def close(self, ending: str = "") -> None:
        """End the progress; ``ending`` (say, "interrupted; nothing written") ends its last line.

        Closing twice is harmless: only the first call writes.
        """
        if self.closed:
            return
        self.closed = True
        if self.bar is not None:
            if ending:
                self.bar.bar_format = "{l_bar}{bar}{r_bar} " + ending.replace("{", "{{").replace("}", "}}")
            self.bar.close()
            self.bar = None
        elif ending:
            if self.interactive:
                self.stream.write(f"{self.label}: {ending}\n")
                self.stream.flush()
            else:
                self._line(time.monotonic(), ending)
        elif not self.interactive and self.done:
            self._line(time.monotonic())
