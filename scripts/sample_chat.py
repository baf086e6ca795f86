"""The sample data's tokenizer and chat template: token ids that decode to a readable agent run.

The bundled samples were random ids, so nothing decoded and no cause of a broken lineage
could be shown as text. This module gives the generators (``make_sample_data.py``,
``make_sample_run.py``) a small byte-level BPE tokenizer trained with the ``tokenizers``
library on the corpus below (written for these samples: a coding agent fixing a bug with
tools), and a ChatML-like template that renders system / user / assistant / tool turns,
optional ``<think>`` reasoning and tool calls as JSON inside ``<tool_call>``.

Training is deterministic (a fixed corpus, fixed trainer settings, one thread of input):
two runs write byte-identical ``tokenizer.json``. The generators write it to
``sample_data/tokenizer.json`` so the app and ``--tokenizer`` decode the samples.

Token ids are produced segment by segment: every piece of a conversation (a system block,
a tool output, the reasoning, the answer) is encoded on its own and the ids concatenated,
as a token-in/token-out server does. A prompt is therefore exactly its parent's prompt and
generation plus the new turn, and a harness that re-renders, strips or re-encodes a piece
changes exactly that piece's ids.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

IM_START, IM_END = "<|im_start|>", "<|im_end|>"
THINK, END_THINK = "<think>", "</think>"
TOOL_CALL, END_TOOL_CALL = "<tool_call>", "</tool_call>"
END_OF_TEXT = "<|endoftext|>"
SPECIAL_TOKENS = (END_OF_TEXT, IM_START, IM_END, THINK, END_THINK, TOOL_CALL, END_TOOL_CALL)
VOCAB_SIZE = 2000

SYSTEM_PROMPT = "You are a coding agent in a Python repository.\nToday is 2024-06-11."
TOOL_SPECS = (
    {"name": "run_tests", "description": "Run the tests.", "parameters": {"path": "string"}},
    {"name": "read_file", "description": "Read a file.", "parameters": {"path": "string"}},
    {"name": "search_code", "description": "Search the code.", "parameters": {"query": "string"}},
    {"name": "apply_patch", "description": "Apply a diff.", "parameters": {"patch": "string"}},
    {"name": "spawn_agent", "description": "Start a helper agent on a sub-task.", "parameters": {"task": "string"}},
)
TASKS = (
    "The test `test_split_tokens_keeps_last` fails after the last refactor. Find the bug in the parser and fix it.",
    "Users report that `load_config` ignores the `--strict` flag. Reproduce it, fix it and add a regression test.",
    "`tokenize_line` drops the final token when a line ends without a newline. Fix the off-by-one.",
    "The CI job `unit` is red since yesterday: `test_merge_spans` raises an IndexError. Make it green.",
    "Speed up `count_words` in `src/stats.py`; it reads the whole file twice. Keep the output identical.",
    "The cache in `src/store.py` never expires entries. Add a time limit and a test for it.",
)
PLANNING = (
    "Let me look at the failing test first.",
    "The traceback points at the parser; I'll read that module.",
    "The off-by-one is in the slice bound. Patching it now.",
    "Running the suite again to confirm the fix.",
    "I need the config loader too before changing anything.",
    "That file is large; searching for the function instead.",
    "The fixture looks stale. Checking where it is written.",
    "One more test to run before I am sure.",
)
REASONING = (
    "The test expects the last token of each span, so the end index must be inclusive.",
    "If the slice stops at i, the token at i is lost; the loop should stop at i + 1.",
    "The flag is parsed but never passed to the loader, so strict mode is always off.",
    "I should read the test before the code, so I know what the author expected.",
    "Searching for the function name is cheaper than reading the whole module.",
    "The patch is one line; the regression test should cover a line without a newline.",
    "The error says index out of range, so some span ends past the end of the list.",
    "Two reads of the same file can become one pass that counts as it goes.",
    "Before I change anything I want to see every caller of this function.",
    "The suite passed except one slow test, which is unrelated to the change.",
)
ANSWERS = (
    "All tests pass. The bug was an exclusive end index in `split_tokens`.",
    "Summary: fixed the boundary check and added a regression test.",
    "Done: the parser now keeps the last token of each span; 212 tests pass.",
    "The failure came from a stale fixture; regenerated it and the suite is green.",
    "Fixed: `load_config` now passes `strict` to the loader, with a test for the flag.",
    "The cache entries now expire after the configured time; two new tests cover it.",
)
TOOL_CALLS = (
    ("run_tests", {"path": "tests/"}),
    ("run_tests", {"path": "tests/test_parser.py"}),
    ("read_file", {"path": "src/parser.py"}),
    ("read_file", {"path": "tests/test_parser.py"}),
    ("search_code", {"query": "def split_tokens"}),
    ("search_code", {"query": "strict"}),
    ("apply_patch", {"patch": "--- a/src/parser.py\n+++ b/src/parser.py\n@@ -41 +41 @@\n-    end = i\n+    end = i + 1\n"}),
)
TOOL_OUTPUT_LINES = (
    "============================= test session starts ==============================",
    "collected 212 items",
    "tests/test_parser.py ....F.....                                          [ 12%]",
    "tests/test_config.py ..........                                          [ 24%]",
    "FAILED tests/test_parser.py::test_split_tokens_keeps_last - AssertionError",
    "E       assert ['a', 'b'] == ['a', 'b', 'c']",
    "212 passed in 3.41s",
    "1 failed, 211 passed in 3.52s",
    "def split_tokens(line, sep=' '):",
    "    spans = find_spans(line, sep)",
    "    return [line[start:end] for start, end in spans]",
    "    for i, ch in enumerate(line):",
    "        if ch == sep:",
    "            end = i",
    "src/parser.py:41:    end = i",
    "src/config.py:17:def load_config(path, strict=False):",
    "src/cli.py:88:    config = load_config(args.config)",
    "Patch applied: 1 file changed, 1 insertion(+), 1 deletion(-)",
    "exit code 0",
    "exit code 1",
)
TEST_PATHS = ("tests/", "tests/test_parser.py", "tests/test_config.py", "tests/test_stats.py",
              "tests/test_store.py", "tests/test_parser.py::test_split_tokens_keeps_last")
FILES = ("src/parser.py", "src/config.py", "src/cli.py", "src/stats.py", "src/store.py", "tests/test_parser.py",
         "tests/conftest.py", "README.md")
QUERIES = ("def split_tokens", "strict", "load_config(", "find_spans", "expire", "count_words", "IndexError")
LISTING = (  # a long file listing, shown once (the text a harness elides)
    '"""Split lines into tokens."""',
    "import re",
    "WORD = re.compile(r'[A-Za-z_]+')",
    "def find_spans(line, sep=' '):",
    "    spans, start = [], 0",
    "    for i, ch in enumerate(line):",
    "        if ch == sep:",
    "            spans.append((start, i))",
    "            start = i + 1",
    "    spans.append((start, len(line)))",
    "    return spans",
)
NUDGES = (
    "Please double-check before finishing.",
    "Please continue.",
    "Run the tests once more and then summarise.",
)
SUMMARIES = (
    # Written to share no run of words with the tasks and turns they summarise.
    "Summary so far: one parser check fails because a span stopped one place early; I changed that bound "
    "and still have to rerun everything.",
    "Summary so far: strict mode never reaches the loader from the command line; next, wire it through and "
    "cover it with a new check.",
)
SUMMARISER_PROMPT = ("Write a short summary of the conversation below, keeping every file name, test name "
                     "and decision, so that the work can continue from the summary alone.")
TITLE_PROMPT = "Give this session a title of at most six words."

# Prose written for the corpus, so that the tokenizer learns the words these samples use.
CORPUS_PROSE = """\
A coding agent works in a loop. It reads the task, thinks about what to do, calls a tool, reads
the tool output and decides on the next step. When the tests pass it writes a short summary and
stops. Each request to the model carries the whole conversation so far: the system prompt, the
task, every assistant turn and every tool result. The model server records the prompt token ids
and the generated token ids of every call, so that a trainer can rebuild one trajectory.

The parser splits a line into tokens. The function split_tokens finds the spans and returns a
list of strings. The bug: the end index of a span was exclusive, so the last token of every span
was lost. The fix sets end = i + 1 and adds a regression test for a line without a newline.

The config loader reads a file and returns a dict. The strict flag makes unknown keys an error.
The command line parses --strict but the call to load_config never passed it on, so strict mode
was always off. The fix passes strict=args.strict and adds a test for the flag.

When the context gets long the harness compacts it: a summariser writes a summary of the work so
far, and the conversation starts again from the system prompt and the summary. A sub-agent gets
its own system prompt and a sub-task, and reports back to the orchestrator through a tool result.
Some chat templates strip the reasoning of earlier turns from the history; some harnesses render
tool calls again with other spacing, or decode the text and encode it again, so the prompt no
longer holds the exact tokens the model generated.

Run the tests. Read the file. Search the code. Apply the patch. Run the suite again. The suite is
green: all tests pass. One test failed: an AssertionError in test_parser. The traceback points at
line 41 of src/parser.py. The fixture is stale. The cache never expires entries. Count the words in
one pass. Keep the output identical. Write the summary. Submit the work. Give the session a title.
"""


def corpus() -> list[str]:
    """The training text: the prose above plus every phrase the template renders, rendered."""
    lines: list[str] = CORPUS_PROSE.splitlines()
    lines += [SYSTEM_PROMPT, *render_tools().splitlines(), SUMMARISER_PROMPT, TITLE_PROMPT]
    for group in (TASKS, PLANNING, REASONING, ANSWERS, TOOL_OUTPUT_LINES, LISTING, NUDGES, SUMMARIES):
        lines += list(group)
    for name, arguments in TOOL_CALLS:
        lines.append(render_tool_call(name, arguments))
    for group in (TEST_PATHS, FILES, QUERIES):
        lines += [json.dumps(x) for x in group]
    for role in ("system", "user", "assistant", "tool"):
        lines.append(f"{IM_START}{role}\n")
    return [line for line in lines if line.strip()]


@cache
def tokenizer() -> Any:
    """The samples' tokenizer, trained afresh (deterministically) on `corpus`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=2, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    text = corpus()
    tok.train_from_iterator(text * 3, trainer=trainer, length=len(text) * 3)
    return tok


def tokenizer_bytes() -> bytes:
    """``tokenizer.json`` as bundled: the library's own serialization, compact."""
    return tokenizer().to_str(pretty=False).encode("utf-8") + b"\n"


@cache
def encode(text: str) -> tuple[int, ...]:
    """One segment's ids (special tokens recognized, nothing added around it)."""
    return tuple(tokenizer().encode(text, add_special_tokens=False).ids)


def encode_chars(text: str) -> list[int]:
    """The same text in another segmentation: every character encoded on its own (what a model
    may sample and a re-encoding of the decoded text never gives back)."""
    return [i for ch in text for i in encode(ch)]


def decode(ids: Any) -> str:
    return tokenizer().decode([int(i) for i in ids], skip_special_tokens=False)


def vocab_size() -> int:
    return tokenizer().get_vocab_size()


# --------------------------------------------------------------------------- the template


def render_tool_call(name: str, arguments: dict[str, Any], *, compact: bool = False) -> str:
    """A tool call as the model writes it. ``compact``: the same JSON without spaces, as a harness
    that re-serializes the call renders it back into the history."""
    body = {"name": name, "arguments": arguments}
    text = json.dumps(body, separators=(",", ":")) if compact else json.dumps(body)
    return f"{TOOL_CALL}\n{text}\n{END_TOOL_CALL}"


def render_tools(tools: Any = TOOL_SPECS) -> str:
    return ", ".join(f"{t['name']}({', '.join(t['parameters'])})" for t in tools)


def system_block(system: str = SYSTEM_PROMPT, tools: Any = TOOL_SPECS) -> list[str]:
    """The opening turn: system prompt and tool list (``tools`` None: no tool list)."""
    head = f"{IM_START}system\n{system}"
    if tools is None:
        return [head + f"{IM_END}\n"]
    return [head + "\nTools: ", render_tools(tools), f"{IM_END}\n"]


def user_block(text: str) -> list[str]:
    return [f"{IM_START}user\n", text, f"{IM_END}\n"]


def assistant_open() -> list[str]:
    return [f"{IM_START}assistant\n"]


def tool_block(text: str) -> list[str]:
    """A tool result fed back after an assistant turn (which ended on its end token)."""
    return ["\n", f"{IM_START}tool\n", text, f"{IM_END}\n"]


def user_after(text: str) -> list[str]:
    """A user turn fed back after an assistant turn."""
    return ["\n"] + user_block(text)


def generation_segments(reasoning: str | None, text: str | None, tool: tuple[str, dict[str, Any]] | None,
                        *, end: bool = True) -> list[str]:
    """One assistant generation: optional reasoning, optional text, optional tool call, end token."""
    out: list[str] = []
    if reasoning is not None:
        out.append(f"{THINK}\n{reasoning}\n{END_THINK}\n\n")
    if text is not None:
        out.append(text + ("\n" if tool is not None else ""))
    if tool is not None:
        out.append(render_tool_call(*tool))
    if end:
        out.append(IM_END)
    return out


def ids_of(segments: list[str]) -> list[int]:
    return [i for s in segments for i in encode(s)]
