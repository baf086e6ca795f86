"""The conversations of ``make_sample_rollouts.py``: a coding agent fixing a bug with tools.

Text only (no tokens): the system prompt, the tools, six small bugs, and the turns of each
kind of story. Within one rollout no reasoning text shares wording with anything else, and
no two turns or tool results start alike, so a stretch of 8 tokens that a harness dropped
never turns up elsewhere in the next prompt (the diagnosis resynchronises on such windows,
docs/contract.md#alignment; ``rollout_render.check`` asserts it for every scenario that relies on it).
"""

from __future__ import annotations

import json
from typing import Any

SYSTEM_PROMPT = ("You are a careful software engineer working in a Python repository. Use the tools to look "
                 "at the code and run the tests; change as little as you can, and explain what you changed.")

TOOLS: list[dict[str, Any]] = [
    {"name": "search_code", "description": "Search the repository for a string; returns file:line:text hits.",
     "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "path": {"type": "string"}},
                    "required": ["query"]}},
    {"name": "read_file", "description": "Read a file of the repository with line numbers.",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "apply_patch", "description": "Replace one line of a file: the replacement is 'old => new'.",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "replacement": {"type": "string"}},
                    "required": ["path", "replacement"]}},
    {"name": "run_tests", "description": "Run pytest on a test file or directory and report the summary.",
     "parameters": {"type": "object", "properties": {"target": {"type": "string"}}, "required": ["target"]}},
]

# Six bugs: where they live, what the user sees, what is wrong, what fixes it.
BUGS: list[dict[str, str]] = [
    {"file": "src/textutil.py", "func": "split_words", "test": "tests/test_textutil.py", "line": "14",
     "symptom": "loses the last word of a line that has no trailing space",
     "cause": "the loop stops one character before the end of the line",
     "old": "for i in range(len(line) - 1):", "new": "for i in range(len(line)):"},
    {"file": "src/cache.py", "func": "expire_entries", "test": "tests/test_cache.py", "line": "41",
     "symptom": "keeps entries that are exactly at their deadline",
     "cause": "the comparison uses a strict greater-than on the deadline",
     "old": "if now > entry.deadline:", "new": "if now >= entry.deadline:"},
    {"file": "src/config.py", "func": "load_config", "test": "tests/test_config.py", "line": "27",
     "symptom": "ignores the strict flag when the file is missing",
     "cause": "the missing-file branch returns defaults before strict is checked",
     "old": "return DEFAULTS", "new": "raise FileNotFoundError(path) if strict else DEFAULTS"},
    {"file": "src/report.py", "func": "format_table", "test": "tests/test_report.py", "line": "63",
     "symptom": "misaligns columns that hold wide unicode characters",
     "cause": "column widths are measured with len instead of display width",
     "old": "width = len(cell)", "new": "width = display_width(cell)"},
    {"file": "src/dates.py", "func": "parse_iso_date", "test": "tests/test_dates.py", "line": "9",
     "symptom": "rejects dates written with a trailing Z for UTC",
     "cause": "the parser hands the raw suffix to fromisoformat, which refuses it here",
     "old": "return datetime.fromisoformat(text)", "new": "return datetime.fromisoformat(text.replace('Z', '+00:00'))"},
    {"file": "src/paths.py", "func": "normalize_path", "test": "tests/test_paths.py", "line": "18",
     "symptom": "turns a lone dot into an empty string",
     "cause": "stripping the trailing separator also strips the only character",
     "old": "return path.rstrip('./')", "new": "return path.rstrip('/') or '.'"},
]


def system_text() -> str:
    """The system turn's text: the prompt, then the tools as Qwen3's template lists them."""
    listed = "\n".join(json.dumps({"type": "function", "function": tool}, ensure_ascii=False) for tool in TOOLS)
    return (SYSTEM_PROMPT + "\n\n# Tools\n\nThese functions are available. Their signatures are listed in "
            "<tools></tools>:\n<tools>\n" + listed + "\n</tools>\n\nTo call one, answer with a JSON object holding "
            "its name and arguments inside <tool_call></tool_call>:\n<tool_call>\n"
            "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>")


def response_tools() -> list[dict[str, Any]]:
    return [{"type": "function", "strict": False, **tool} for tool in TOOLS]


def task_text(bug: dict[str, str]) -> str:
    return (f"`{bug['func']}` in {bug['file']} {bug['symptom']}. Please find the cause, fix it, and make sure "
            f"{bug['test']} passes.")


# ---------------------------------------------------------------- turns (reasoning, content, calls, outputs)

def search_turn(bug: dict[str, str]) -> dict[str, Any]:
    return {
        "reasoning": (f"Start with the definition. If I know where {bug['func']} lives and who calls it, I can "
                      "judge how risky a change is before touching anything."),
        "content": f"Looking up {bug['func']} in the repository.",
        "calls": [("search_code", {"query": f"def {bug['func']}", "path": "src"})],
        "outputs": [(f"{bug['file']}:{bug['line']}:def {bug['func']}(...):\n{bug['test']}:5:from "
                     f"{bug['file'][4:-3]} import {bug['func']}")],
    }


def read_turn(bug: dict[str, str]) -> dict[str, Any]:
    return {
        "reasoning": (f"Found a single definition, and only its test module imports it. Reading {bug['file']} "
                      "should show the faulty line directly."),
        "content": "Opening that module to read the function body.",
        "calls": [("read_file", {"path": bug["file"]})],
        "outputs": [(f"{int(bug['line']) - 1}  # helper used by the CLI\n{bug['line']}  def {bug['func']}(...):\n"
                     f"{int(bug['line']) + 1}      {bug['old']}\n{int(bug['line']) + 2}          ...")],
    }


def patch_turn(bug: dict[str, str]) -> dict[str, Any]:
    return {
        "reasoning": (f"There it is: {bug['cause']}. A one-line change is enough, and no caller depends on the "
                      "old behaviour."),
        "content": "Changing that one line now.",
        "calls": [("apply_patch", {"path": bug["file"], "replacement": f"{bug['old']} => {bug['new']}"})],
        "outputs": ["patched: 1 line replaced"],
    }


def test_turn(bug: dict[str, str]) -> dict[str, Any]:
    return {
        "reasoning": "With the edit in place, the module's own tests are the quickest evidence that nothing regressed.",
        "content": f"Running {bug['test']} against the change.",
        "calls": [("run_tests", {"target": bug["test"]})],
        "outputs": ["========== 9 passed in 0.37s =========="],
    }


def final_turn(bug: dict[str, str], long: bool = False) -> dict[str, Any]:
    content = (f"Fixed `{bug['func']}` in {bug['file']}. I replaced `{bug['old']}` with "
               f"`{bug['new']}`, and {bug['test']} passes.")
    if long:
        content += ("\n\nHere is a fuller account of the change, step by step, for the review. First, the search "
                    "showed that the function is defined once and imported only by its tests, so the change cannot "
                    "surprise another module. Second, reading the body made the faulty line plain, and I compared "
                    "it with the documented behaviour in the module docstring. Third, I replaced just that line "
                    "and left the surrounding code untouched. Fourth, the test run passed, nine tests in well under "
                    "a second. Possible follow-ups: a regression test for this exact input, a note in the "
                    "changelog, and a look at sibling helpers that might share the same pattern of mistake.")
    return {
        "reasoning": "Everything checks out, so I can summarise the cause and the fix for the user.",
        "content": content,
        "calls": [],
        "outputs": [],
    }


def explain_turn(bug: dict[str, str]) -> dict[str, Any]:
    """An answer without tools (the first exchange a sliding window drops)."""
    return {
        "reasoning": (f"Before editing I should describe my plan, since the user may prefer another approach to "
                      f"{bug['func']}."),
        "content": (f"My plan: locate `{bug['func']}`, read it, make the smallest possible change, and run "
                    f"{bug['test']}. Shall I go ahead?"),
        "calls": [],
        "outputs": [],
    }


def regression_turns(bug: dict[str, str]) -> list[dict[str, Any]]:
    """After the user asks for a regression test: write it, run it, report."""
    return [
        {"reasoning": ("A new request arrived: pin the behaviour down with a test. Appending one case to the "
                       "existing test module keeps things tidy."),
         "content": "Adding a regression test for that input.",
         "calls": [("apply_patch", {"path": bug["test"], "replacement": f"# end of file => def test_{bug['func']}_edge(): ..."})],
         "outputs": ["patched: 1 line replaced (test added)"]},
        {"reasoning": "That test needs to fail on the old code and pass on the new one; running the module confirms the second half.",
         "content": "Running the tests once more, new case included.",
         "calls": [("run_tests", {"target": bug["test"]})],
         "outputs": ["========== 10 passed in 0.41s =========="]},
        {"reasoning": "Both parts of the request are done now, so a short report closes it.",
         "content": f"Added `test_{bug['func']}_edge` to {bug['test']}; all 10 tests pass.",
         "calls": [], "outputs": []},
    ]


FOLLOW_UP = "Thanks. Could you also add a regression test for exactly that case?"
GO_AHEAD = "Yes, that plan works for me; please make the change."

STEPS = {"search": search_turn, "read": read_turn, "patch": patch_turn, "test": test_turn}


def conversation(kind: str, task_index: int, options: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The task and its turns (dicts with reasoning, content, calls, outputs, user_after).

    ``fix``: the tool steps ``options["steps"]`` then a final answer (``long`` for a long one).
    ``parallel``: the first turn searches and reads in one go (two tool calls), then the rest.
    ``followup``: a fix, then the user asks for a regression test, then three more turns.
    ``chat``: a plan answered without tools, the user's go-ahead, then a fix.
    """
    bug = BUGS[task_index % len(BUGS)]
    steps = options.get("steps", ["search", "read", "patch", "test"])
    turns = [STEPS[name](bug) for name in steps]
    if kind == "parallel":
        first = {"reasoning": (f"Two lookups are independent here: where {bug['func']} is defined, and the text "
                               "of its module. Doing both at once saves a round trip."),
                 "content": "Searching and reading in parallel.",
                 "calls": search_turn(bug)["calls"] + read_turn(bug)["calls"],
                 "outputs": search_turn(bug)["outputs"] + read_turn(bug)["outputs"]}
        turns = [first] + turns
    if kind == "chat":
        turns = [dict(explain_turn(bug), user_after=GO_AHEAD)] + turns
    turns.append(final_turn(bug, long=options.get("long", False)))
    if kind == "followup":
        turns[-1] = dict(turns[-1], user_after=FOLLOW_UP)
        turns += regression_turns(bug)
    return task_text(bug), turns
