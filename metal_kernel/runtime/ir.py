"""Textual LLVM IR, as much of it as the IR passes read: tokens, types,
calls and the module's top-level layout. Shared by the work-item-loop
compiler (runtime/workitem/) and the checking mode's instrumentation
(check/instrument.py). Input is clang's output: one instruction per line."""

from __future__ import annotations

import re
from dataclasses import dataclass


class Unsupported(Exception):
    """IR a pass does not handle (the message says why)."""


# --------------------------------------------------------------- lexing --

_LOCAL = r'%(?:"[^"]*"|[-a-zA-Z$._0-9]+)'
_GLOBAL = r'@(?:"[^"]*"|[-a-zA-Z$._0-9]+)'
_TOKEN = re.compile(rf'{_LOCAL}|{_GLOBAL}|"[^"]*"')
_DEF = re.compile(rf'^\s*({_LOCAL}) = ')
_LABEL_LINE = re.compile(r'^("[^"]*"|[-a-zA-Z$._0-9]+):(\s*;.*)?$')
_WORD = re.compile(r'[-a-zA-Z$._0-9]+')


def _name(tok: str) -> str:
    """'%"a b"' / '%12' -> 'a b' / '12'."""
    body = tok[1:]
    return body[1:-1] if body.startswith('"') else body


def _ref(name: str) -> str:
    return "%" + (name if re.fullmatch(r'[-a-zA-Z$._0-9]+', name) else f'"{name}"')


def _gref(name: str) -> str:
    return "@" + (name if re.fullmatch(r'[-a-zA-Z$._0-9]+', name) else f'"{name}"')


# --------------------------------------------------------------- types --

_SIMPLE_TYPES = ("half", "bfloat", "float", "double", "x86_fp80", "fp128", "ppc_fp128", "void",
                 "label", "metadata", "token", "x86_amx")


def parse_type(s: str, i: int) -> tuple[str, int]:
    """The type starting at s[i] (leading spaces skipped) and the index after it."""
    n = len(s)
    while i < n and s[i] == " ":
        i += 1
    start = i
    if i >= n:
        raise Unsupported("truncated type")
    c = s[i]
    if s.startswith("ptr", i) and (i + 3 >= n or not _WORD.match(s[i + 3])):
        i += 3
        m = re.match(r" addrspace\(\d+\)", s[i:])
        if m:
            i += m.end()
    elif c == "i" and i + 1 < n and s[i + 1].isdigit():
        m = re.match(r"i\d+", s[i:])
        i += m.end()
    elif c == "<" and s.startswith("<{", i):
        i = _parse_struct_body(s, i + 1) + 1
        if i > n or s[i - 1] != ">":
            raise Unsupported("bad packed struct type")
    elif c == "<":
        m = re.match(r"<(vscale x )?\d+ x ", s[i:])
        if not m:
            raise Unsupported(f"bad vector type at {s[i:i + 30]!r}")
        _, j = parse_type(s, i + m.end())
        if j >= n or s[j] != ">":
            raise Unsupported("bad vector type")
        i = j + 1
    elif c == "[":
        m = re.match(r"\[\d+ x ", s[i:])
        if not m:
            raise Unsupported("bad array type")
        _, j = parse_type(s, i + m.end())
        if j >= n or s[j] != "]":
            raise Unsupported("bad array type")
        i = j + 1
    elif c == "{":
        i = _parse_struct_body(s, i)
    elif c == "%":
        m = re.match(_LOCAL, s[i:])
        i += m.end()
    else:
        m = _WORD.match(s, i)
        if not m or m.group(0) not in _SIMPLE_TYPES:
            raise Unsupported(f"not a type: {s[i:i + 30]!r}")
        i = m.end()
    return s[start:i], i


def _parse_struct_body(s: str, i: int) -> int:
    # s[i] == '{'
    i += 1
    while i < len(s) and s[i] == " ":
        i += 1
    if s[i] == "}":
        return i + 1
    while True:
        _, i = parse_type(s, i)
        while i < len(s) and s[i] == " ":
            i += 1
        if s[i] == ",":
            i += 1
            continue
        if s[i] == "}":
            return i + 1
        raise Unsupported("bad struct type")


def _split_top(s: str) -> list[str]:
    """Splits at commas outside brackets."""
    parts, depth, cur = [], 0, []
    in_str = False
    for ch in s:
        if ch == '"':
            in_str = not in_str
        if not in_str:
            if ch in "([{<":
                depth += 1
            elif ch in ")]}>":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append("".join(cur).strip())
                cur = []
                continue
        cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _matching(s: str, i: int) -> int:
    """Index of the bracket closing s[i]."""
    pairs = {"(": ")", "[": "]", "{": "}", "<": ">"}
    open_, close = s[i], pairs[s[i]]
    depth = 0
    in_str = False
    for j in range(i, len(s)):
        ch = s[j]
        if ch == '"':
            in_str = not in_str
        elif not in_str:
            if ch == open_:
                depth += 1
            elif ch == close:
                depth -= 1
                if depth == 0:
                    return j
    raise Unsupported("unbalanced brackets")


_PARAM_ATTR_WORDS = {
    "noundef", "zeroext", "signext", "inreg", "noalias", "nonnull", "nocapture", "readonly",
    "writeonly", "readnone", "returned", "nofree", "immarg", "noext", "byval", "byref", "sret",
    "inalloca", "preallocated", "swiftself", "swifterror", "swiftasync", "allocalign",
    "allocptr", "writable", "dead_on_unwind", "dead_on_return",
}


def _strip_attrs(s: str) -> str:
    """Drops parameter/return attributes from the front of s."""
    while True:
        s = s.lstrip()
        m = _WORD.match(s)
        if not m:
            return s
        w = m.group(0)
        rest = s[m.end():]
        if w in ("align", "dereferenceable", "dereferenceable_or_null") and re.match(r"\s*\d", rest):
            s = re.sub(r"^\s*\d+", "", rest)
            continue
        if rest.startswith("(") and w not in ("getelementptr", "bitcast", "ptrtoint", "inttoptr",
                                              "addrspacecast", "trunc", "add", "sub", "xor",
                                              "blockaddress", "dso_local_equivalent", "no_cfi"):
            s = rest[_matching(rest, 0) + 1:]
            continue
        if w in _PARAM_ATTR_WORDS:
            s = rest
            continue
        return s


_FMF = {"fast", "nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc"}
_CCONV = re.compile(r"(fastcc|coldcc|ccc|cc \d+|x86_\w+cc|preserve_\w+|cxx_fast_tlscc|swiftcc|"
                    r"swifttailcc|tailcc|ghccc|webkit_jscc|anyregcc|cfguard_checkcc|intel_ocl_bicc)\b")


@dataclass
class Call:
    ret: str
    callee: str  # '@name' (global) or '%x' (indirect) or 'asm'
    args: list[tuple[str, str]]  # (type, value)


def parse_call(rest: str) -> Call:
    """rest: the instruction text from 'call' on (after any 'tail'/'musttail')."""
    m = re.match(r"\s*(?:(?:tail|musttail|notail)\s+)?call\s+", rest)
    if not m:
        raise Unsupported("not a call")
    s = rest[m.end():]
    # fast-math flags, calling convention, return attributes, addrspace
    while True:
        s = s.lstrip()
        w = _WORD.match(s)
        if w and w.group(0) in _FMF:
            s = s[w.end():]
            continue
        cm = _CCONV.match(s)
        if cm:
            s = s[cm.end():]
            continue
        if s.startswith("addrspace("):
            s = s[_matching(s, len("addrspace")) + 1:]
            continue
        stripped = _strip_attrs(s)
        if stripped != s:
            s = stripped
            continue
        break
    ret, i = parse_type(s, 0)
    s = s[i:].lstrip()
    if s.startswith("("):  # explicit function type (varargs)
        s = s[_matching(s, 0) + 1:].lstrip()
    if s.startswith("asm"):
        return Call(ret, "asm", [])
    cm = re.match(rf"{_GLOBAL}|{_LOCAL}", s)
    if not cm:
        raise Unsupported(f"cannot parse callee in {rest[:80]!r}")
    callee = cm.group(0)
    s = s[cm.end():]
    if not s.startswith("("):
        raise Unsupported("cannot parse call arguments")
    close = _matching(s, 0)
    args = []
    for a in _split_top(s[1:close]):
        t, j = parse_type(a, 0)
        args.append((t, _strip_attrs(a[j:]).strip()))
    return Call(ret, callee, args)


class Module:
    """The parts of a textual LLVM module this transform reads."""

    def __init__(self, text: str):
        self.lines = text.split("\n")
        self.types: dict[str, str] = {}
        self.attr_groups: dict[str, str] = {}
        self.functions: dict[str, tuple[int, int]] = {}  # name -> (define line, '}' line)
        self.declares: dict[str, int] = {}
        i = 0
        n = len(self.lines)
        while i < n:
            ln = self.lines[i]
            if ln.startswith("%"):
                m = re.match(rf"({_LOCAL}) = type (.*)$", ln)
                if m:
                    self.types[_name(m.group(1))] = m.group(2)
            elif ln.startswith("attributes #"):
                m = re.match(r"attributes #(\d+) = \{(.*)\}\s*$", ln)
                if m:
                    self.attr_groups[m.group(1)] = m.group(2)
            elif ln.startswith("define "):
                m = re.search(rf"({_GLOBAL})\(", ln)
                j = i + 1
                while j < n and self.lines[j] != "}":
                    j += 1
                self.functions[_name(m.group(1))] = (i, j)
                i = j
            elif ln.startswith("declare "):
                m = re.search(rf"({_GLOBAL})\(", ln)
                if m:
                    self.declares[_name(m.group(1))] = i
            i += 1

    def body(self, name: str) -> list[str]:
        a, b = self.functions[name]
        return self.lines[a:b + 1]

    def globals_referenced(self, name: str) -> set[str]:
        out = set()
        a, b = self.functions[name]
        for ln in self.lines[a + 1:b]:
            for tok in re.findall(_GLOBAL, ln):
                out.add(_name(tok))
        return out

    def reaching(self, markers, skip_prefix: str = "") -> set[str]:
        """Defined functions that may reach one of `markers` through calls
        (functions named `skip_prefix...` excepted)."""
        refs = {f: self.globals_referenced(f) for f in self.functions}
        found = set()
        changed = True
        while changed:
            changed = False
            for f, r in refs.items():
                if f in found or (skip_prefix and f.startswith(skip_prefix)):
                    continue
                if any(m in r for m in markers) or (r & found):
                    found.add(f)
                    changed = True
        return found
