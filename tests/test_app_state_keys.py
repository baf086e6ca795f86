"""Every session key of the app is a name in ``tokencap/app/state.py``, never a string literal in a page."""

from __future__ import annotations

import ast
from pathlib import Path

from tokencap.app.state import Keys

APP = Path(__file__).resolve().parents[1] / "tokencap" / "app"
SESSION = ("STATE", "st.session_state")
ACCESS = ("get", "pop", "setdefault", "__setitem__", "__getitem__", "__contains__", "__delitem__")


def _key_nodes(tree: ast.AST) -> list[ast.expr]:
    """The expressions used as a session key: ``STATE[k]``, ``STATE.get(k, ...)`` and its kin, ``k in STATE``
    and any call's ``key=k`` (a widget's or an element's key)."""
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and ast.unparse(node.value) in SESSION:
            found.append(node.slice)
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and ast.unparse(func.value) in SESSION and func.attr in ACCESS \
                    and node.args:
                found.append(node.args[0])
            found += [k.value for k in node.keywords if k.arg == "key"]
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)) \
                and ast.unparse(node.comparators[0]) in SESSION:
            found.append(node.left)
    return found


def literal_keys(source: str) -> list[str]:
    """``line: key`` of every session key written as a string literal (plain or f-string) in ``source``."""
    return [f"{n.lineno}: {ast.unparse(n)}" for n in _key_nodes(ast.parse(source))
            if isinstance(n, ast.JoinedStr) or (isinstance(n, ast.Constant) and isinstance(n.value, str))]


def test_the_scan_finds_each_way_a_page_writes_a_literal_key():
    page = '''
STATE = st.session_state
STATE["a"] = 1
st.session_state.get("b")
STATE.pop(f"c:{rk}", None)
if "d" not in STATE:
    st.button("x", key="e")
STATE[Keys.A] = STATE.get(Keys.B)
st.button("y", key=Keys.more(rk, 1))
'''
    assert literal_keys(page) == ["3: 'a'", "4: 'b'", "5: f'c:{rk}'", "6: 'd'", "7: 'e'"]


def test_no_app_module_uses_a_string_literal_as_a_session_key():
    found = {str(p.relative_to(APP)): keys for p in sorted(APP.rglob("*.py")) if p.name != "state.py"
             for keys in [literal_keys(p.read_text(encoding="utf-8"))] if keys}
    assert found == {}, f"name these keys in tokencap/app/state.py (Keys): {found}"


def test_each_key_name_stands_for_one_key():
    values = [v for k, v in vars(Keys).items() if k.isupper()]
    assert len(values) == len(set(values)) and all(isinstance(v, str) and v for v in values)
    assert Keys.OPEN_ROLLOUT == "open_rollout" and Keys.RUN_W_VERDICT == "run_w_verdict"
    assert Keys.cmp_pinned("r") == "cmp_pinned:r" and Keys.break_expander("a:b") == "break_a_b"
