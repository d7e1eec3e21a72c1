"""Overloads that differ only in address space, on a CPU with one address space.

Metal makes a library repeat a member function (or constructor, conversion
operator) once per address space of the object it is called on, and some
helpers once per address space of a pointer parameter:

    constexpr complex_t() thread : real(0), imag(0) {}
    constexpr complex_t() threadgroup : real(0), imag(0) {}   // MLX complex.h
    T load(device const T* p) { ... }
    T load(constant T* p) { ... }
    template <class T> struct pointer_element<device T*> { using type = T; };
    template <class T> struct pointer_element<thread T*> { using type = T; };

Here the address-space words are empty macros in pass 2 (`constant` is
`const`): the copies become the same declaration, a redefinition. Real
address-space types (clang's `address_space(N)`) would keep them apart, but
plain C++ then refuses every member call and copy of a class object through
such a pointer (`this` in address space 1), which is every `device float4*`.

So, on the preprocessed text, before the rewriter:
  1. an address-space word qualifying `this` (after a member function's
     parameter list) is removed: one object model, no qualifier to carry;
  2. declarations at namespace and class scope that are the same once the
     address-space words are erased (as pass 2 erases them) are kept once:
     the first of each set. Sound only because they are the same text: the
     copies Metal makes a library write.
Copies that differ in more than the address space (a `load` that reads
device memory one way and threadgroup memory another) cannot be told apart
without address-space types: that is a MetalCompileError naming both places.

The text keeps every newline and line marker (tokens are blanked, never
removed), so diagnostics still point at the user's lines.
"""

from __future__ import annotations

import re

from .errors import MetalCompileError
from .lexer import LineMap

ADDRESS_SPACES = ("device", "constant", "thread", "threadgroup")

# Cheap tests: a `this` qualifier, or a name declared twice with an
# address space in its parameter or template-argument list.
_THIS_QUALIFIER = re.compile(
    r"\)\s*(?:(?:const|volatile)\s+)*(?:device|constant|thread|threadgroup)\s*(?:[{:;=&\[]|->|noexcept|const|volatile)")
_SPACED_NAME = re.compile(r"(\w+)\s*[(<][^;{}()<>]*?\b(?:device|constant|thread|threadgroup)\b")
# _Toks, faster than lexer.tokenize (no whitespace tokens, one finditer):
# what the scan needs is words, brackets and punctuation; strings and line
# markers only have to be skipped whole.
_TOKEN = re.compile(r"""(?m)(?P<ident>[A-Za-z_]\w*)(?!["'])|[{}()\[\];:,]|"""
                    r"""(?P<skip>^\#[^\n]*|(?:u8|u|U|L)?R"(?P<d>[^()\\\s]{0,16})\((?:.|\n)*?\)(?P=d)"|"""
                    r"""(?:u8|u|U|L)?"(?:\\.|[^"\\\n])*"|(?:u8|u|U|L)?'(?:\\.|[^'\\\n])+')|"""
                    r"""\.?\d(?:[eEpP][+-]|[\w.']|)*|->|&&|\|\||<<=|>>=|>>|<<|[<>=!+\-*/%&|^]=|\S""")


class _Tok:
    """A token (the few fields the scan reads; lexer.Token is slower to build)."""

    __slots__ = ("kind", "text", "start", "end")

    def __init__(self, kind: str, text: str, start: int, end: int):
        self.kind, self.text, self.start, self.end = kind, text, start, end


# What may follow a `this` qualifier: the body, a ctor-initializer, the end
# of the declaration, `= default`, more qualifiers, a trailing return type.
_AFTER_THIS_QUALIFIER = {"{", ":", ";", "=", "&", "&&", "noexcept", "->", "[", "const", "volatile",
                         "override", "final"}
_CV = {"const", "volatile"}
_SCOPE_WORDS = {"namespace", "struct", "class", "union"}


def collapse(text: str) -> str:
    """`text` with `this` address-space qualifiers removed and declarations
    that differ only in address space kept once."""
    if not _THIS_QUALIFIER.search(text):
        names = [m.group(1) for m in _SPACED_NAME.finditer(text)]
        if len(names) == len(set(names)):
            return text
    toks = [_Tok("ident" if m.lastgroup == "ident" else "punct", m.group(), m.start(), m.end())
            for m in _TOKEN.finditer(text) if m.lastgroup != "skip" and m.lastgroup != "d"]
    blank: list[_Tok] = []
    _this_qualifiers(toks, blank)
    removed = {id(t) for t in blank}
    _duplicates(text, toks, removed, blank)
    if not blank:
        return text
    out = []
    pos = 0
    for t in sorted(blank, key=lambda t: t.start):
        out.append(text[pos:t.start])
        out.append(" " * (t.end - t.start))
        pos = t.end
    out.append(text[pos:])
    return "".join(out)


def _this_qualifiers(toks: list[_Tok], blank: list[_Tok]) -> None:
    """Address-space words right after a parameter list (and cv-qualifiers)."""
    n = len(toks)
    for i, t in enumerate(toks):
        if t.text not in ADDRESS_SPACES or i + 1 >= n:
            continue
        k = i - 1
        while k >= 0 and toks[k].text in _CV:
            k -= 1
        if k >= 0 and toks[k].text == ")" and toks[i + 1].text in _AFTER_THIS_QUALIFIER:
            blank.append(t)


def _normal(toks: list[_Tok], removed: set[int]) -> tuple[str, ...]:
    """The declaration as pass 2 sees it: address spaces erased, `constant`
    read-only, repeated `const` once."""
    out: list[str] = []
    for t in toks:
        if id(t) in removed:
            continue
        word = "const" if t.text == "constant" else t.text
        if word in ("device", "thread", "threadgroup"):
            continue
        if word == "const" and out and out[-1] == "const":
            continue
        out.append(word)
    return tuple(out)


def _match(toks: list[_Tok], i: int) -> int:
    """Index of the bracket closing the one at i (or the last token)."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    open_, close = toks[i].text, pairs[toks[i].text]
    depth = 0
    for k in range(i, len(toks)):
        if toks[k].text == open_:
            depth += 1
        elif toks[k].text == close:
            depth -= 1
            if depth == 0:
                return k
    return len(toks) - 1


def _declared_name(head: list[_Tok]) -> str:
    """The name before the parameter list (`load` in `T load(device T* p)`)."""
    depth = 0
    j = 0
    while j < len(head):
        t = head[j].text
        if t in ("__attribute__", "__declspec", "alignas", "decltype") and j + 1 < len(head) and head[j + 1].text == "(":
            j = _match(head, j + 1) + 1
            continue
        if t == "<":
            depth += 1
        elif t in (">", ">>"):
            depth -= 1 if t == ">" else 2
        elif t == "(" and depth <= 0 and j > 0:
            return head[j - 1].text if head[j - 1].text != ")" else "operator()"
        j += 1
    return "?"


class _Decl:
    def __init__(self, toks: list[_Tok], body_at: int | None, spaced: bool):
        self.toks = toks
        self.body_at = body_at  # index in toks of a function body's '{'
        self.spaced = spaced  # it names an address space


def _duplicates(text: str, toks: list[_Tok], removed: set[int], blank: list[_Tok]) -> None:
    """Blanks the later copies of declarations equal up to address spaces."""
    seen: dict[tuple, dict[tuple, _Decl]] = {}  # scope -> normal text -> first declaration
    signatures: dict[tuple, dict[tuple, _Decl]] = {}  # scope -> normal signature -> declaration
    lines = None

    def declare(scope: tuple, decl: list[_Tok], body_at: int | None):
        nonlocal lines
        if any(t.text == "kernel" for t in decl):
            return
        spaced = any(t.text in ADDRESS_SPACES for t in decl)
        key = _normal(decl, removed)
        first = seen.setdefault(scope, {}).get(key)
        if first is not None:
            # a copy, if an address space is what told the two apart (a plain
            # C++ redefinition stays the compiler's to report)
            if spaced or first.spaced:
                blank.extend(t for t in decl if id(t) not in removed)
            return
        seen[scope][key] = _Decl(decl, body_at, spaced)
        if body_at is None or not spaced:
            return
        sig = _normal(decl[:body_at], removed)
        other = signatures.setdefault(scope, {}).get(sig)
        if other is not None:
            lines = lines or LineMap(text)
            file, line = lines.locate(decl[0].start)
            ofile, oline = lines.locate(other.toks[0].start)
            name = _declared_name(decl[:body_at])
            raise MetalCompileError(
                f"two definitions that differ only in address space (device / constant / thread / "
                f"threadgroup), here and at {ofile}:{oline}, have different bodies: this runtime has one "
                f"address space and cannot tell which '{name}' to call. Give them different names, "
                f"or one body for every address space.", file=file, line=line)
        signatures[scope][sig] = seen[scope][key]

    def walk(start: int, end: int, scope: tuple) -> None:
        i = start
        decl_start = start
        while i < end:
            t = toks[i].text
            if t in ("(", "["):
                i = _match(toks, i) + 1
                continue
            if t == ";":
                declare(scope, toks[decl_start:i + 1], None)
                i += 1
                decl_start = i
                continue
            if t == "}":  # stray: end of an enclosing scope
                i += 1
                decl_start = i
                continue
            if t == ":" and i == decl_start + 1 and toks[decl_start].text in ("public", "private", "protected"):
                i += 1
                decl_start = i
                continue
            if t != "{":
                i += 1
                continue
            close = _match(toks, i)
            head = toks[decl_start:i]
            kind = _head_kind(head)
            if kind in ("class", "namespace"):
                # its own scope; a class definition is also one declaration
                # of the enclosing scope (two identical specialisations)
                walk(i + 1, close, scope + (tuple(x.text for x in head),))
                last = close
                j = close + 1
                while j < end and toks[j].text not in (";", "{", "}"):
                    j += 1  # `} name;`: declarators after a class body
                if j < end and toks[j].text == ";":
                    last = j
                if kind == "class" and any(x.text in ADDRESS_SPACES for x in head):
                    # a specialisation on an address space (`pointer_element<device T*>`)
                    declare(scope, toks[decl_start:last + 1], None)
                i = last + 1
                decl_start = i
                continue
            if kind == "function":
                last = close + 1 if close + 1 < end and toks[close + 1].text == ";" else close
                declare(scope, toks[decl_start:last + 1], i - decl_start)
                i = last + 1
                decl_start = i
                continue
            i = close + 1  # an initializer `= {...}`, an enum body, `extern "C" {`

    walk(0, len(toks), ())


def _head_kind(head: list[_Tok]) -> str:
    """What the '{' after `head` opens: a "class" or "namespace" body, a
    "function" body, or something else (initializer, enum, extern block)."""
    k = 0
    while k < len(head) and head[k].text == "template" and k + 1 < len(head) and head[k + 1].text == "<":
        depth = 0
        k += 1
        while k < len(head):
            depth += {"<": 1, ">": -1, ">>": -2}.get(head[k].text, 0)
            if head[k].text in ("(", "["):
                k = _match(head, k)
            k += 1
            if depth <= 0:
                break
    depth = 0
    has_params = False
    for j in range(k, len(head)):
        t = head[j].text
        if t in ("(", "["):
            depth += 1
            has_params = True
        elif t in (")", "]"):
            depth -= 1
        if depth:
            continue
        if not has_params and t == "namespace":
            return "namespace"
        if not has_params and t in ("struct", "class", "union"):
            return "class"
        if t in ("enum", "extern") or (t == "=" and head[j - 1].text != "operator"):
            return "other"
    return "function" if has_params else "other"
