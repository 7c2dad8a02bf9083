"""Extract llama.cpp's reply-parser cases into data toolwire's tests read.

llama.cpp's ``tests/test-chat.cpp`` writes each parser case as a builder chain,
``tst.test("<model output>").tools({...}).reasoning_format(...).expect(msg).run();``, for a
tester opened on a named template. This script reads that C++ with a small interpreter for
the subset the file uses (string literals, named messages and tools, ``auto`` locals, range
``for`` loops over template paths, the LFM2 helper called per template) and writes one JSON
case per chain: the input, the options that decide how the reply is read, and the message
llama.cpp expects. Chains about partial snapshots, prefill continuation and JSON-schema
response modes are counted by reason and left out: they are not about reading a finished
reply.

    python scripts/peer_cases.py [SOURCE.cpp] [OUT.json]
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SOURCE = Path("/work/shared/peer/llama.cpp-test-chat.cpp")
OUT = ROOT / "tests" / "fixtures" / "peer" / "llama_cpp_cases.json"
COMMIT = "3f545beccee69d9975f466ec7e45fd9aacd8ba90"
TEMPLATES = ROOT / "tests" / "fixtures" / "chat_templates"

#: What a generation prompt ends with when it leaves a thinking block open for the model.
THINK_OPENERS = (
    "<think>",
    "[THINK]",
    "<seed:think>",
    "<|START_THINKING|>",
    "<|open|>think<|sep|>",
    "Here are my reasoning steps:",
)

# --------------------------------------------------------------------------- tokens

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<raw>R"(?P<delim>[^(\s]*)\((?P<rawbody>.*?)\)(?P=delim)")
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<char>'(?:[^'\\\n]|\\.)*')
  | (?P<number>\d[\w.]*)
  | (?P<ident>[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)
  | (?P<punct>::|->|&&|\|\||==|!=|<=|>=|\+=|\+\+|--|.)
    """,
    re.S | re.X,
)

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", '"': '"', "'": "'", "\\": "\\", "?": "?"}


def _unescape(body: str) -> str:
    out: list[str] = []
    i = 0
    raw = bytearray()
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e == "x":
            m = re.match(r"[0-9a-fA-F]+", body[i + 2 :])
            assert m, body
            raw.append(int(m.group(), 16))
            i += 2 + m.end()
            try:  # \x bytes spell UTF-8: join them before decoding
                out.append(raw.decode())
                raw.clear()
            except UnicodeDecodeError:
                pass
            continue
        if e in "uU":
            n = 4 if e == "u" else 8
            out.append(chr(int(body[i + 2 : i + 2 + n], 16)))
            i += 2 + n
            continue
        out.append(_ESCAPES[e])
        i += 2
    assert not raw, body
    return "".join(out)


@dataclass
class Tok:
    kind: str  # str, num, id, p
    text: str
    line: int


def tokenize(source: str) -> list[Tok]:
    toks: list[Tok] = []
    line = 1
    for m in _TOKEN.finditer(source):
        kind = m.lastgroup
        text = m.group()
        if kind == "raw" or m.group("raw"):
            toks.append(Tok("str", m.group("rawbody"), line))
        elif kind == "string":
            toks.append(Tok("str", _unescape(text[1:-1]), line))
        elif kind == "number":
            toks.append(Tok("num", text, line))
        elif kind == "ident":
            toks.append(Tok("id", text, line))
        elif kind in ("punct", "char"):
            toks.append(Tok("p", text, line))
        line += text.count("\n")
    return toks


# --------------------------------------------------------------------------- values


def msg(
    content: str = "", reasoning: str = "", name: str = "", args: str = "", id_: str = ""
) -> dict[str, Any]:
    """A ``common_chat_msg`` as llama.cpp's ``simple_assist_msg`` builds it."""
    calls = [{"name": name, "arguments": args, "id": id_}] if name or id_ else []
    return {"content": content, "reasoning": reasoning, "calls": calls}


def _calls(pairs: list[Any]) -> list[dict[str, Any]]:
    out = []
    for p in pairs:
        name, args, *rest = p
        id_ = rest[0] if rest and isinstance(rest[0], str) else ""
        out.append({"name": name, "arguments": args, "id": id_})
    return out


FUNCTIONS = {
    "simple_assist_msg": msg,
    "message_with_tool_calls": lambda n, a: msg("", "", n, a),
    "message_with_tool_calls_and_reasoning": lambda n, a, r: msg("", r, n, a),
    "message_with_reasoning_content_and_multiple_tool_calls": lambda r, c, calls: {
        "content": c,
        "reasoning": r,
        "calls": _calls(calls),
    },
    "message_with_content_and_tool_call": lambda c, n, a: msg(c, "", n, a),
    "message_with_reasoning_and_tool_call": lambda r, n, a: msg("", r, n, a),
    "std::string": lambda s="": s,
}


@dataclass
class Tester:
    path: str


class Unknown:
    """A value the interpreter could not compute; an error only if a case uses it."""

    def __init__(self, why: str) -> None:
        self.why = why


@dataclass
class Env:
    vars: dict[str, Any]
    parent: Env | None = None

    def get(self, name: str) -> Any:
        env: Env | None = self
        while env is not None:
            if name in env.vars:
                return env.vars[name]
            env = env.parent
        raise KeyError(name)


class Interp:
    """Evaluates the C++ subset, one statement at a time, collecting ``.test`` chains."""

    def __init__(self, toks: list[Tok]) -> None:
        self.t = toks
        self.cases: list[dict[str, Any]] = []
        self.functions: dict[str, tuple[list[str], int]] = {}

    # -- expressions

    def expr(self, i: int, env: Env) -> tuple[Any, int]:
        value, i = self.primary(i, env)
        while self.t[i].text == "+":
            rhs, i = self.primary(i + 1, env)
            value = value + rhs
        return value, i

    def args(self, i: int, env: Env, close: str) -> tuple[list[Any], int]:
        out: list[Any] = []
        while self.t[i].text != close:
            v, i = self.expr(i, env)
            out.append(v)
            if self.t[i].text == ",":
                i += 1
        return out, i + 1

    def primary(self, i: int, env: Env) -> tuple[Any, int]:
        tok = self.t[i]
        if tok.kind == "str":
            parts = []
            while self.t[i].kind == "str":
                parts.append(self.t[i].text)
                i += 1
            return "".join(parts), i
        if tok.kind == "num":
            return int(tok.text) if tok.text.isdigit() else tok.text, i + 1
        if tok.text == "{":
            return self.args(i + 1, env, "}")
        if tok.text == "(":
            v, i = self.expr(i + 1, env)
            assert self.t[i].text == ")"
            return v, i + 1
        if tok.kind == "id":
            name = tok.text
            nxt = self.t[i + 1].text
            if nxt == "(":
                a, j = self.args(i + 2, env, ")")
                if name == "peg_tester":
                    return Tester(a[0]), j
                if name in FUNCTIONS:
                    return FUNCTIONS[name](*a), j
                return Unknown(f"call {name}"), j
            if nxt == "{":  # TypeName{...}
                return self.args(i + 2, env, "}")
            if name in ("true", "false"):
                return name == "true", i + 1
            if name.startswith(("COMMON_", "nullptr")):
                return name, i + 1
            try:
                return env.get(name), i + 1
            except KeyError:
                return Unknown(f"name {name}"), i + 1
        raise SyntaxError(f"line {tok.line}: unexpected {tok.text!r}")

    # -- statements

    def skip_balanced(self, i: int) -> int:
        """From an opening bracket to just past its match."""
        pairs = {"(": ")", "{": "}", "[": "]"}
        stack = [pairs[self.t[i].text]]
        i += 1
        while stack:
            x = self.t[i].text
            if x in pairs:
                stack.append(pairs[x])
            elif x == stack[-1]:
                stack.pop()
            i += 1
        return i

    def skip_statement(self, i: int) -> int:
        while self.t[i].text != ";":
            if self.t[i].text in "({[":
                i = self.skip_balanced(i)
            else:
                i += 1
        return i + 1

    def block(self, i: int, env: Env) -> int:
        """Run the block whose ``{`` is at ``i``; return the index past its ``}``."""
        assert self.t[i].text == "{"
        env = Env({}, env)
        i += 1
        while self.t[i].text != "}":
            i = self.statement(i, env)
        return i + 1

    def statement(self, i: int, env: Env) -> int:
        tok = self.t[i]
        x = tok.text
        if x == "{":
            return self.block(i, env)
        if x in ("if", "while", "catch", "switch"):
            return self.body(self.skip_balanced(i + 1), env)
        if x in ("else", "try", "do"):
            return self.body(i + 1, env)
        if x == "for":
            return self.for_loop(i, env)
        if tok.kind == "id" and self.t[i + 1].text == "." and self.t[i + 2].text == "test":
            try:
                tester = env.get(x)
            except KeyError:
                tester = None
            if isinstance(tester, Tester):
                return self.chain(i, tester, env)
        if tok.kind == "id" and x in self.functions and self.t[i + 1].text == "(":
            a, j = self.args(i + 2, env, ")")
            params, body = self.functions[x]
            self.block(body, Env(dict(zip(params, a, strict=True)), self.globals))
            return j + 1
        decl = self.declaration(i, env)
        if decl is not None:
            return decl
        return self.skip_statement(i)

    def body(self, i: int, env: Env) -> int:
        if self.t[i].text == "{":
            return self.block(i, env)
        return self.statement(i, env)

    def for_loop(self, i: int, env: Env) -> int:
        end = self.skip_balanced(i + 1)
        header = self.t[i + 2 : end - 1]
        colon = next((k for k, t in enumerate(header) if t.text == ":"), None)
        if colon is None:  # a counting loop: no cases are written in one
            return self.body(end, env)
        var = header[colon - 1].text
        values, _ = self.expr(i + 2 + colon + 1, env)
        after = end
        for v in values:
            after = self.body(end, Env({var: v}, env))
        return after

    _TYPES = ("auto", "common_chat_msg", "std::string", "common_chat_tool", "char", "std::vector")

    def declaration(self, i: int, env: Env) -> int | None:
        j = i
        while self.t[j].text in ("static", "const"):
            j += 1
        if self.t[j].text not in self._TYPES:
            return None
        j += 1
        if self.t[j].text == "<":
            while self.t[j].text != ">":
                j += 1
            j += 1
        while self.t[j].text in ("*", "&", "const"):
            j += 1
        if self.t[j].kind != "id":
            return None
        name = self.t[j].text
        j += 1
        try:
            if self.t[j].text == "=":
                value, k = self.expr(j + 1, env)
            elif self.t[j].text == "{":
                value, k = self.args(j + 1, env, "}")
            else:
                return None
        except (SyntaxError, AssertionError, TypeError, IndexError):
            k = j
        if self.t[k].text != ";":
            env.vars[name] = Unknown(f"line {self.t[i].line}")
            return self.skip_statement(i)
        env.vars[name] = value
        return k + 1

    def chain(self, i: int, tester: Tester, env: Env) -> int:
        line = self.t[i].line
        i += 2
        calls: list[tuple[str, list[Any]]] = []
        while True:
            method = self.t[i].text
            assert self.t[i + 1].text == "(", (line, method)
            a, i = self.args(i + 2, env, ")")
            calls.append((method, a))
            if self.t[i].text == ";":
                break
            assert self.t[i].text == ".", (line, self.t[i].text)
            i += 1
        self.cases.append({"line": line, "template": tester.path, "calls": calls})
        return i + 1

    def run(self) -> None:
        """Read the file's top level: globals, then the two functions that hold the cases."""
        env = Env({})
        i = 0
        while i < len(self.t):
            tok = self.t[i]
            if (
                tok.text in ("test_lfm2_parser", "test_template_output_peg_parsers")
                and self.t[i - 1].text == "void"
            ):
                end = self.skip_balanced(i + 1)
                params = [
                    self.t[k - 1].text for k in range(i + 2, end) if self.t[k].text in (",", ")")
                ]
                self.functions[tok.text] = (params, end)
                i = self.skip_balanced(end)
                continue
            if tok.text in ("{", "(", "["):
                i = self.skip_balanced(i)
                continue
            decl = self.declaration(i, env) if tok.text in ("static", "const") else None
            i = decl if decl is not None else i + 1
        self.globals = env
        params, body = self.functions["test_template_output_peg_parsers"]
        self.block(body, Env({p: None for p in params}, env))


# --------------------------------------------------------------------------- cases

DEFAULTS = {
    "reasoning_format": "COMMON_REASONING_FORMAT_NONE",
    "enable_thinking": True,
    "add_generation_prompt": True,
    "parallel_tool_calls": False,
}


@dataclass
class Case:
    raw: dict[str, Any]
    opts: dict[str, Any] = field(default_factory=dict)
    expect: dict[str, Any] = field(default_factory=lambda: msg())
    expected: bool = False

    def build(self) -> None:
        for method, a in self.raw["calls"]:
            if method == "test":
                self.opts["input"] = a[0]
            elif method == "expect":
                self.expect = json.loads(json.dumps(a[0]))
                self.expected = True
            elif method == "expect_content":
                self.expect["content"] = a[0]
                self.expected = True
            elif method == "expect_reasoning":
                self.expect["reasoning"] = a[0]
                self.expected = True
            elif method == "expect_tool_calls":
                self.expect["calls"] = _calls(a[0])
                self.expected = True
            elif method == "tools":
                self.opts["tools"] = [_tool(t) for t in a[0]]
            elif method == "run":
                pass
            else:
                self.opts[method] = a[0] if a else True

    def skip_reason(self) -> str | None:
        o = self.opts
        if o.get("is_partial"):
            return "partial snapshot"
        if "continue_final_message" in o or o.get("add_generation_prompt") is False:
            return "prefill continuation"
        if "json_schema" in o:
            return "json-schema response mode"
        if not self.expected:
            return "no expected message (rendering check)"
        return None


def _tool(value: list[Any]) -> dict[str, Any]:
    name, description, parameters = value
    return {"name": name, "description": description, "parameters": json.loads(parameters)}


def _tool_key(known: dict[str, Any], tool: dict[str, Any]) -> str:
    """The key a tool is kept under: its name, made unique when two tools share one."""
    n = 1
    key = tool["name"]
    while known.setdefault(key, tool) != tool:
        n += 1
        key = f"{tool['name']}#{n}"
    return key


def _arguments(text: str) -> Any:
    """A call's expected arguments as JSON; llama.cpp compares them re-serialised, so must we."""
    return json.loads(text) if text.strip() else {}


def _prompt_opens_thinking(
    template: str, enable_thinking: bool, tools: list[dict[str, Any]]
) -> str | None:
    """The thinking opener the template's generation prompt ends with ("" for none), or None
    when the template is not in the corpus or refuses the probe conversation."""
    path = TEMPLATES / template
    if not path.exists():
        return None
    from toolwire.templates.load import load_template

    tpl = load_template(path)
    messages = [{"role": "user", "content": "Hey there!"}]
    try:
        prompt = tpl.render(
            messages, tools or None, add_generation_prompt=True, enable_thinking=enable_thinking
        )
    except Exception:  # a template that refuses this probe: say unknown
        return None
    tail = prompt.rstrip()
    return next((o for o in THINK_OPENERS if tail.endswith(o)), "")


def extract(
    source: Path, probe: Callable[[str, bool, list[dict[str, Any]]], str | None] | None = None
) -> tuple[list[dict[str, Any]], Counter[str], dict[str, Any]]:
    """Every finished-reply case in ``source``, the skipped ones counted by reason, the tools.

    ``probe`` says which thinking opener a template's generation prompt ends with (default:
    render the template from the corpus); tests pass a cheap one.
    """
    interp = Interp(tokenize(source.read_text()))
    interp.run()
    by_name: dict[str, Any] = {}
    skipped: Counter[str] = Counter()
    out: list[dict[str, Any]] = []
    seen: Counter[str] = Counter()
    for raw in interp.cases:
        case = Case(raw)
        case.build()
        reason = case.skip_reason()
        if reason:
            skipped[reason] += 1
            continue
        o = {**DEFAULTS, **case.opts}
        template = Path(raw["template"]).name
        fmt = o["reasoning_format"].removeprefix("COMMON_REASONING_FORMAT_").lower()
        case_tools = o.get("tools", [])
        keys = [_tool_key(by_name, t) for t in case_tools]
        opener = (probe or _prompt_opens_thinking)(template, o["enable_thinking"], case_tools)
        opened_from = "template"
        if opener is None:  # not in the corpus: thinking read or closed, never opened by the reply
            opened_from = "case"
            started = o["input"].lstrip().startswith(THINK_OPENERS)
            closed = "</think>" in o["input"]
            inferred = (case.expect["reasoning"] or closed) and not started
            opener = "<think>" if inferred else ""
        key = f"{Path(template).stem}:{raw['line']}"
        seen[key] += 1
        case_id = key if seen[key] == 1 else f"{key}#{seen[key]}"
        item: dict[str, Any] = {
            "id": case_id,
            "template": template,
            "line": raw["line"],
            "input": o["input"],
            "reasoning_format": fmt,
            "enable_thinking": o["enable_thinking"],
            "thinking_open": bool(opener),
            "thinking_opener": opener,
            "thinking_open_from": opened_from,
            "tools": keys,
            "expect": {
                "content": case.expect["content"],
                "reasoning": case.expect["reasoning"],
                "calls": [
                    {
                        "name": c["name"],
                        "arguments": _arguments(c["arguments"]),
                        **({"id": c["id"]} if c["id"] else {}),
                    }
                    for c in case.expect["calls"]
                ],
            },
        }
        for extra in ("tool_choice", "parallel_tool_calls", "messages"):
            if extra in case.opts:
                item[extra] = case.opts[extra] if extra != "messages" else True
        out.append(item)
    return out, skipped, by_name


def main(argv: list[str]) -> None:
    source = Path(argv[1]) if len(argv) > 1 else SOURCE
    target = Path(argv[2]) if len(argv) > 2 else OUT
    cases, skipped, tools = extract(source)
    used = sorted({n for c in cases for n in c["tools"]})
    doc = {
        "source": "ggml-org/llama.cpp tests/test-chat.cpp",
        "commit": COMMIT,
        "license": "MIT (LICENSE next to this file)",
        "skipped": dict(sorted(skipped.items())),
        "tools": {n: tools[n] for n in used},
        "cases": cases,
    }
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(
        f"{len(cases)} cases from {len({c['template'] for c in cases})} templates;",
        f"skipped: {dict(skipped)}",
    )


if __name__ == "__main__":
    main(sys.argv)
