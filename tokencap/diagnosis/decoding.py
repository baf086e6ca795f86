"""Decoded text of a divergence, when a tokenizer is given (docs/contract.md#decoded-text).

Text is evidence for a person, never proof: it is shown beside the positions and turns
`tokens_replaced` into `retokenized` only when both spans decode to the same text. An id
the tokenizer cannot decode leaves the text null with a note, because the `tokenizers`
library silently skips ids outside its vocabulary and a text with holes would look like a
real difference. `tokenizers` is imported only when a path must be read.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

import numpy as np

MAX_CHARS = 2000
"""A decoded span is clipped to this many characters; a clipped one ends with the ellipsis."""
ELLIPSIS = "…"
_ID_LIMIT = 2 ** 32  # the tokenizers library takes u32 ids


class TokenizerLike(Protocol):
    """What the diagnosis calls on a tokenizer (a `tokenizers.Tokenizer` has both)."""

    def decode(self, ids: list[int], skip_special_tokens: bool = ...) -> str: ...

    def id_to_token(self, id: int) -> str | None: ...


class TokenizerError(ValueError):
    """A tokenizer that cannot be found or read (one line, says why and the forms it may take)."""


def read_tokenizer_file(path: str | os.PathLike[str], shown: str | None = None) -> tuple[TokenizerLike, bytes]:
    """A `tokenizers.Tokenizer` read from the ``tokenizer.json`` at ``path``, with the file's bytes;
    `TokenizerError` (naming ``shown``, else the path) when it cannot be."""
    where = shown if shown is not None else str(path)
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise TokenizerError(f"{where}: decoding needs the `tokenizers` package "
                             "(pip install 'tokencap-rl[tokenizer]')") from None
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise TokenizerError(f"{where}: no such file (a tokenizer.json was expected)") from None
    except OSError as exc:
        raise TokenizerError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    try:
        return Tokenizer.from_str(data.decode("utf-8")), data
    except UnicodeDecodeError:
        raise TokenizerError(f"{where}: not a tokenizer.json (not UTF-8 text)") from None
    except Exception as exc:  # noqa: BLE001 -- the tokenizers library raises plain Exceptions
        reason = " ".join(str(exc).split())[:200]
        raise TokenizerError(f"{where}: not a tokenizer.json the tokenizers library can read ({reason})") from None


def load_tokenizer(spec: str | os.PathLike[str]) -> TokenizerLike:
    """The tokenizer ``spec`` names (docs/contract.md#tokenizers): a ``tokenizer.json``, a directory holding one, or a
    model name ``Org/Name`` in the local Hugging Face cache. Returns a
    `tokenizer_lookup.FoundTokenizer` (it decodes, and says where it came from);
    `TokenizerError` when it cannot be found or read. Never downloads."""
    from .tokenizer_lookup import find_tokenizer

    return find_tokenizer(spec)


def as_tokenizer(tokenizer: TokenizerLike | str | os.PathLike[str] | None) -> TokenizerLike | None:
    """``tokenizer`` itself, or the one its path names (`TokenizerError` for a bad path)."""
    if tokenizer is None:
        return None
    if isinstance(tokenizer, (str, os.PathLike)):
        return load_tokenizer(tokenizer)
    return tokenizer


def undecodable(tokenizer: TokenizerLike, ids: np.ndarray) -> int | None:
    """The first id of ``ids`` (by value) the tokenizer has no token for, else None."""
    for value in np.unique(np.asarray(ids)).tolist():
        if value >= _ID_LIMIT:
            return int(value)
        try:
            if tokenizer.id_to_token(int(value)) is None:
                return int(value)
        except Exception:  # noqa: BLE001 -- a tokenizer that fails on an id cannot decode it
            return int(value)
    return None


def decode(tokenizer: TokenizerLike, ids: np.ndarray) -> tuple[str | None, int | None]:
    """(the text of ``ids`` with special tokens kept, None) or (None, the first id it cannot decode)."""
    bad = undecodable(tokenizer, ids)
    if bad is not None:
        return None, bad
    try:
        return tokenizer.decode([int(v) for v in np.asarray(ids).tolist()], skip_special_tokens=False), None
    except Exception:  # noqa: BLE001 -- never fail a diagnosis on the tokenizer's behalf
        return None, int(np.asarray(ids)[0]) if np.asarray(ids).size else -1


def clipped(text: str, limit: int = MAX_CHARS) -> str:
    """``text`` cut to ``limit`` characters, the last being `ELLIPSIS` when it was cut."""
    return text if len(text) <= limit else text[:limit - 1] + ELLIPSIS


def starts_with_think(text: str) -> bool:
    """Whether ``text`` starts, after blanks, with a ``<think>`` tag (reasoning)."""
    return text.lstrip().startswith("<think>")


def think_left_open(text: str) -> bool:
    """Whether ``text`` holds a ``<think>`` with no ``</think>`` after it (it stops inside reasoning)."""
    opened = text.rfind("<think>")
    return opened >= 0 and text.find("</think>", opened) < 0


__all__ = ["ELLIPSIS", "MAX_CHARS", "TokenizerError", "TokenizerLike", "as_tokenizer", "clipped", "decode",
           "load_tokenizer", "read_tokenizer_file", "starts_with_think", "think_left_open", "undecodable"]
