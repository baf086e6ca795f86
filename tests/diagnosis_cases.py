"""Rollouts built to break in one known way each, for the diagnosis tests.

`base()` gives two linked calls: the root ``a`` (opening O = 20 tokens, generation G1 = 10)
and ``a2`` (prompt = a's sequence + an interstitial X of 5 tokens, generation G2 = 10), so
the predecessor's sequence is S = O + G1 + X + G2 (L = 45). A break ``b`` then gets a
prompt bent on purpose. Token ids come from disjoint ranges so nothing matches by chance.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synth_snapshots import Capture

from tokencap import build_rollout, diagnose

OPENING, GEN1, INTER, GEN2 = 20, 10, 5, 10


class Case:
    def __init__(self, seed: int = 3) -> None:
        self.c = Capture("case", seed=seed)
        self.fresh_base = 900_000
        self.opening = self.fresh(OPENING)
        self.g1 = self.fresh(GEN1)
        self.x = self.fresh(INTER)
        self.g2 = self.fresh(GEN2)
        self.c.call("a", prompt=self.opening, generation=self.g1)
        self.c.call("a2", "a", prompt=self.opening + self.g1 + self.x, generation=self.g2)

    @property
    def s(self) -> list[int]:
        return self.opening + self.g1 + self.x + self.g2

    def fresh(self, n: int) -> list[int]:
        out = list(range(self.fresh_base, self.fresh_base + n))
        self.fresh_base += n
        return out

    def brk(self, prompt: list[int], *, resolution: str | None = "unresolved", claimed: str | None = None,
            call_id: str = "b", gen: int = 4, **extra: Any) -> dict[str, Any]:
        """The break: ``prompt`` as given, a fresh generation."""
        if claimed is not None:
            resolution = "resolved"
        return self.c.call(call_id, prompt=prompt, generation=self.fresh(gen), resolution=resolution,
                           claimed=claimed, **extra)

    def result(self, **kwargs: Any):
        return build_rollout(self.c.snapshot(), **kwargs)

    def breaks(self, **kwargs: Any):
        return diagnose(self.result(), **kwargs)

    def only(self, **kwargs: Any):
        found = [b for b in self.breaks(**kwargs) if b.call_id == "b"]
        assert len(found) == 1, found
        return found[0]


def tiny_tokenizer(path: Path | None = None):
    """A small byte-level BPE trained on a few sentences, with chat special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<think>", "</think>", "<|im_start|>",
                                                                  "<|im_end|>"])
    corpus = ["the model reads the question and thinks about the answer",
              "hello world, this is a small corpus for a tiny tokenizer",
              '{"name": "search", "arguments": {"query": "weather in paris"}}',
              "the tool returned three results and the model answered"] * 3
    tok.train_from_iterator(corpus, trainer)
    if path is not None:
        tok.save(str(path))
    return tok
