"""`tokencap inspect`: each rollout of a source built, and told as text: the call tree, notes, verdicts,
mask reasons, and why each break happened."""

from __future__ import annotations

import argparse
import sys

from ..rollout import RolloutResult
from .build import _build_each, _inputs, add_source_arguments
from .options import EXIT_OK


def add_parser(sub: argparse._SubParsersAction) -> None:
    cmd = sub.add_parser("inspect", help="print the call tree, notes, verdicts and mask reasons")
    add_source_arguments(cmd)
    cmd.add_argument("--tokenizer", metavar="TOKENIZER",
                     help="a tokenizer.json, a model directory holding one, or Org/Name in the local Hugging Face "
                          "cache (never downloaded): show each break's divergences as text and tell re-encoded "
                          "text from changed text")


def run(args: argparse.Namespace) -> int:
    from ..diagnosis import diagnose, load_tokenizer, span_texts
    from ..report import render_text

    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else None  # a bad path fails before any work

    def report(result: RolloutResult, notes: list[str], evidence: dict | None) -> str:
        breaks = diagnose(result, tokenizer=tokenizer, evidence=evidence)
        texts = [span_texts(result, b, tokenizer) for b in breaks] if tokenizer is not None else []
        return render_text(result, notes, breaks, texts)

    results = _build_each(_inputs(args, evidence=True), args.terminal_call_id)
    sys.stdout.write("\n".join(report(*built) for built in results))
    return EXIT_OK
