"""Token-level rewrites: macro definitions and `#pragma unroll` (pass 1
runs with -dD), floating literals, words Metal has but this runtime
rejects (features.py), and function constants."""

from __future__ import annotations

import re

from .features import rejected_words
from .lexer import TokenView, float_literal, literal_text

# Words of a function constant's declaration that are not its type.
_FC_SPECIFIERS = {"static", "constant", "constexpr", "const"}

_PRAGMA_UNROLL = re.compile(r"^(\s*#\s*pragma\s+unroll)(.*)$")
_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)(\()?")
_UNDEF = re.compile(r"^\s*#\s*undef\s+([A-Za-z_]\w*)")


class LexicalRewrites(TokenView):
    """Rewrites that need no knowledge of declarations."""

    function_constants: dict
    _fc_indices: dict[str, int]
    _rejected = rejected_words()

    def scan_directives(self):
        """Pass 1 ran with -dD: its `#define`/`#undef` lines give the macros
        in effect at each point. They are dropped here (pass 2 must not
        expand the expanded text again), after expanding object-like macros
        in `#pragma unroll(...)`, which the preprocessor leaves alone."""
        macros: dict[str, str | None] = {}  # name -> body (None: function-like)
        for t in self.all_toks:
            if t.kind != "marker":
                continue
            m = _DEFINE.match(t.text)
            if m:
                body = t.text[m.end():].strip() if not m.group(2) else None
                macros[m.group(1)] = body
                self.replace(t.start, t.end, "")
                continue
            m = _UNDEF.match(t.text)
            if m:
                macros.pop(m.group(1), None)
                self.replace(t.start, t.end, "")
                continue
            m = _PRAGMA_UNROLL.match(t.text)
            if m and re.search(r"[A-Za-z_]", m.group(2)):
                expanded = _expand(m.group(2), macros)
                # A function-like macro cannot be expanded here: the pragma is
                # only a hint, so it goes rather than fail to compile.
                self.replace(t.start, t.end, m.group(1) + expanded if expanded is not None else "")

    def scan_literals_and_types(self):
        for i, t in enumerate(self.toks):
            if t.kind == "ident":
                if t.text == "double":
                    self.error(i, "'double' is not supported in Metal (Apple GPUs have no 64-bit "
                               "floating point); use float")
                if t.text in self._rejected:
                    self.error(i, f"'{t.text}' is not supported: {self._rejected[t.text]}")
            if t.kind == "number":
                fl = float_literal(t.text)
                if fl is None:
                    continue
                if fl[1] in ("l", "L"):
                    self.error(i, "long double literals are not supported in Metal")
                if fl[1] in ("", "h", "H", "bf", "BF"):
                    self.replace(t.start, t.end, literal_text(*fl))

    def handle_function_constant(self, i: int) -> int:
        """`[static] constant [constexpr const] T name [[function_constant(n)]];`
        at namespace scope -> `constexpr T name = T(value);`."""
        toks = self.toks
        start = self.statement_start(i)
        end = i
        while end < len(toks) and toks[end].text not in (";", "{", "("):
            if self.is_attr_open(end):
                end = self.attribute_span(end)[0]
                continue
            end += 1
        if end >= len(toks) or toks[end].text != ";":
            return i + 1
        for q in range(i, end):
            if not self.is_attr_open(q):
                continue
            _, attrs = self.attribute_span(q)
            for aname, args in attrs:
                if aname != "function_constant":
                    continue
                index = self.attr_int(args)
                name = toks[q - 1].text
                type_text = " ".join(t.text for t in toks[start:q - 1] if t.text not in _FC_SPECIFIERS)
                value = self.function_constants.get(name, self.function_constants.get(index))
                self._fc_indices[name] = index
                init = "{}" if value is None else f"({_cxx_value(value)})"
                self.blank(start, end + 1, f"constexpr {type_text} {name} = {type_text}{init};")
                return end + 1
        return i + 1

    def scan_function_constant_queries(self):
        """`is_function_constant_defined(x)` -> true/false (after declarations are known)."""
        toks = self.toks
        for i, t in enumerate(toks):
            if t.text == "is_function_constant_defined" and i + 1 < len(toks) and toks[i + 1].text == "(":
                close = self.match_close(i + 1)
                name = "".join(x.text for x in toks[i + 2 : close])
                defined = name in self.function_constants or (
                    name in self._fc_indices and self._fc_indices[name] in self.function_constants
                )
                self.replace(t.start, toks[close].end, "true" if defined else "false")


def _expand(text: str, macros: dict[str, str | None], depth: int = 0) -> str | None:
    """`text` with its object-like macros expanded (None if it uses a
    function-like one)."""
    if depth > 32:
        return None
    out = []
    for tok in re.split(r"([A-Za-z_]\w*)", text):
        if tok in macros:
            body = macros[tok]
            if body is None:
                return None
            inner = _expand(body, {k: v for k, v in macros.items() if k != tok}, depth + 1)
            if inner is None:
                return None
            out.append(f"({inner})")
        else:
            out.append(tok)
    return "".join(out)


def _cxx_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value}ll"
    if isinstance(value, float):
        return repr(float(value)) + "f" if "e" in repr(value) or "." in repr(value) else f"{value}.0f"
    raise TypeError(f"function constant values must be bool, int or float, not {type(value).__name__}")
