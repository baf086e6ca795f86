"""`tokencap app RUN` scans a big run beside its server: ``python -m tokencap.services.prescan``.

    python -m tokencap.services.prescan RUN [--final-responses RECORDS] --parent PID

Writes the table the Run page would scan into the app's scan cache (`services.scan_cache.prescan`),
while the server starts and the browser loads the page; the page finds it there, or waits
for it with its progress (`claims.follow_scan`). It prints nothing: when it fails, the page
scans the run itself and says why. SIGTERM or SIGINT stop it cleanly (workers stopped, no
part file); so does the end of the ``tokencap app`` that started it (``PR_SET_PDEATHSIG``).
Its work is guarded by ``if __name__ == "__main__"``: a scan worker that re-imports it runs
nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ..interrupts import die_with_parent, exit_code, handling_interrupts
from ..run.child import EXIT_FAILED, EXIT_OK
from .scan_cache import prescan


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tokencap.services.prescan")
    parser.add_argument("source")
    parser.add_argument("--final-responses")
    parser.add_argument("--tokenizer")
    parser.add_argument("--parent", type=int, default=0)
    args = parser.parse_args(argv)
    die_with_parent(args.parent)
    try:
        with handling_interrupts():
            prescan(args.source, final_responses=args.final_responses, tokenizer=args.tokenizer)
    except KeyboardInterrupt as exc:
        return exit_code(exc)
    except Exception:  # noqa: BLE001 -- the page scans the run itself and shows what is wrong
        return EXIT_FAILED
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
