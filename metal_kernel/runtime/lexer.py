"""Tokens of preprocessed C++/MSL text, with their offsets; the line map
back to the user's files; and TokenView, the navigation over tokens (and
the recorded text edits) the rewriter's stages share.

The rewriter works on the output of the preprocessor, so there are no
comments or macros left; what remains is identifiers, numbers, literals,
punctuation and `#` lines (clang's `# N "file"` line markers, pragmas, and
the macro definitions pass 1 keeps with -dD).
"""

from __future__ import annotations

import bisect
import re
from typing import NamedTuple

from .errors import MetalCompileError

_TOKEN = re.compile(
    r"""
    (?P<marker>^\#[^\n]*)                       # line marker or surviving #pragma
  | (?P<space>[ \t\r\f\v]+|\n)
  | (?P<string>(?:u8|u|U|L)?R"(?P<delim>[^()\\\s]{0,16})\((?:.|\n)*?\)(?P=delim)"
              |(?:u8|u|U|L)?"(?:\\.|[^"\\\n])*")
  | (?P<char>(?:u8|u|U|L)?'(?:\\.|[^'\\\n])+')
  | (?P<number>\.?\d(?:[eEpP][+-]|[\w.']|)*)
  | (?P<ident>[A-Za-z_]\w*)
  | (?P<punct>\.\.\.|->\*|<<=|>>=|<=>|::|->|\+\+|--|<<|&&|\|\||[<>=!+\-*/%&|^]=|\#\#|[{}\[\]()<>;:,.?~!+\-*/%&|^=\#@\\$`])
  | (?P<other>.)  # anything unexpected: a one-character punctuator clang will report
    """,
    re.VERBOSE | re.MULTILINE,
)

_MARKER = re.compile(r'^#\s*(?:line\s+)?(\d+)\s+"((?:\\.|[^"\\])*)"')


class Token(NamedTuple):
    kind: str  # ident, number, string, char, punct, marker
    text: str
    start: int
    end: int


def tokenize(text: str) -> list[Token]:
    kinds = {"delim": "string", "other": "punct"}
    return [Token(kinds.get(m.lastgroup, m.lastgroup), m.group(), m.start(), m.end())
            for m in _TOKEN.finditer(text) if m.lastgroup != "space"]


class LineMap:
    """Maps offsets in preprocessed text back to (file, line) of the source."""

    def __init__(self, text: str):
        self._line_starts = [0]
        for i, ch in enumerate(text):
            if ch == "\n":
                self._line_starts.append(i + 1)
        # For each marker: (physical line index of the line after it, file,
        # line, the file name as the marker spells it, quotes included)
        self._markers: list[tuple[int, str, int, str]] = []
        for idx, start in enumerate(self._line_starts):
            if start < len(text) and text[start] == "#":
                end = text.find("\n", start)
                m = _MARKER.match(text[start : end if end >= 0 else len(text)])
                if m:
                    name = m.group(2).encode().decode("unicode_escape")
                    self._markers.append((idx + 1, name, int(m.group(1)), f'"{m.group(2)}"'))
        self._marker_lines = [m[0] for m in self._markers]

    def locate(self, offset: int) -> tuple[str, int]:
        name, line, _ = self.locate_spelled(offset)
        return name, line

    def locate_spelled(self, offset: int) -> tuple[str, int, str]:
        """(file, line, the file name as a line marker spells it)."""
        phys = bisect.bisect_right(self._line_starts, offset) - 1
        k = bisect.bisect_right(self._marker_lines, phys) - 1
        if k < 0:
            return ("<source>", phys + 1, '"<source>"')
        first_phys, name, line, spelled = self._markers[k]
        return (name, line + phys - first_phys, spelled)


_FLOAT_DEC = re.compile(r"^(\d[\d']*\.?[\d']*|\.\d[\d']*)([eE][+-]?\d+)?([a-zA-Z]*)$")
_FLOAT_HEX = re.compile(r"^(0[xX][0-9a-fA-F']*\.?[0-9a-fA-F']*[pP][+-]?\d+)([a-zA-Z]*)$")


def float_literal(text: str):
    """(body, suffix) when `text` is a floating literal, else None."""
    if text[:2] in ("0x", "0X"):
        m = _FLOAT_HEX.match(text)
        return (m.group(1), m.group(2)) if m else None
    m = _FLOAT_DEC.match(text)
    if not m:
        return None
    body, exp, suffix = m.group(1), m.group(2) or "", m.group(3)
    if "." not in body and not exp:
        return None
    return body + exp, suffix


def literal_text(body: str, suffix: str) -> str:
    """A floating literal as the C++ pass spells it (Metal has no double)."""
    if suffix in ("h", "H"):
        return f"((half){body}f)"
    if suffix in ("bf", "BF"):
        return f"((bfloat){body}f)"
    return body + ("f" if suffix == "" else suffix)


class TokenView:
    """Tokens of one preprocessed text and the edits recorded on it (offset
    ranges and their replacements, applied together at the end)."""

    def __init__(self, text: str):
        self.text = text
        self.all_toks: list[Token] = tokenize(text)
        self.toks: list[Token] = [t for t in self.all_toks if t.kind != "marker"]
        self.lines = LineMap(text)
        self.edits: list[tuple[int, int, str]] = []

    def where(self, i: int) -> tuple[str, int]:
        return self.lines.locate(self.toks[i].start)

    def error(self, i: int, message: str):
        file, line = self.where(min(i, len(self.toks) - 1))
        raise MetalCompileError(message, file=file, line=line)

    def replace(self, start: int, end: int, text: str):
        self.edits.append((start, end, text))

    def blank(self, i: int, j: int, with_text: str | None = None):
        """Removes tokens i..j-1, keeping their newlines (or puts `with_text`
        in their place, followed by those newlines)."""
        if i < j:
            start, end = self.toks[i].start, self.toks[j - 1].end
            newlines = "\n" * self.text.count("\n", start, end)
            self.replace(start, end, (with_text or "") + newlines if (with_text or newlines) else " ")

    def tokens_text(self, i: int, j: int, skip_attributes: bool = True) -> str:
        """Tokens i..j-1 on one line, without Metal attributes, literals as
        the rewriter spells them."""
        parts = []
        k = i
        while k < j:
            if skip_attributes and self.is_attr_open(k):
                k = self.attribute_span(k)[0]
                continue
            t = self.toks[k]
            fl = float_literal(t.text) if t.kind == "number" else None
            parts.append(literal_text(*fl) if fl else t.text)
            k += 1
        return " ".join(parts)

    def match_close(self, i: int) -> int:
        """Index of the bracket closing the one at i."""
        pairs = {"(": ")", "[": "]", "{": "}"}
        open_, close = self.toks[i].text, pairs[self.toks[i].text]
        depth = 0
        for k in range(i, len(self.toks)):
            t = self.toks[k].text
            if t == open_:
                depth += 1
            elif t == close:
                depth -= 1
                if depth == 0:
                    return k
        self.error(i, f"unbalanced '{open_}'")

    def match_angle(self, i: int) -> int:
        """Index of the '>' closing the template argument list opened at i."""
        depth = 0
        k = i
        while k < len(self.toks):
            t = self.toks[k].text
            if t in ("(", "[", "{"):
                k = self.match_close(k)
            elif t == "<":
                depth += 1
            elif t == ">":
                depth -= 1
                if depth == 0:
                    return k
            elif t == ">>":
                depth -= 2
                if depth <= 0:
                    return k
            elif t in (";", "}"):
                break
            k += 1
        self.error(i, "unbalanced '<'")

    def is_attr_open(self, i: int) -> bool:
        return self.toks[i].text == "[" and i + 1 < len(self.toks) and self.toks[i + 1].text == "["

    def attribute_span(self, i: int):
        """For `[[...]]` at i: (end index past ']]', list of (name, arg tokens))."""
        close = self.match_close(i)
        inner = self.toks[i + 2 : close - 1]
        attrs = []
        k = 0
        while k < len(inner):
            if inner[k].text == ",":
                k += 1
                continue
            name = inner[k].text
            k += 1
            while k + 1 < len(inner) and inner[k].text == "::":
                name += "::" + inner[k + 1].text
                k += 2
            args = []
            if k < len(inner) and inner[k].text == "(":
                depth = 0
                while k < len(inner):
                    if inner[k].text == "(":
                        depth += 1
                    elif inner[k].text == ")":
                        depth -= 1
                        if depth == 0:
                            break
                    args.append(inner[k])
                    k += 1
                args = args[1:]
                k += 1
            attrs.append((name, args))
        return close + 1, attrs

    @staticmethod
    def attr_int(args: list[Token]) -> int:
        text = "".join(t.text for t in args).rstrip("uUlL")
        try:
            return int(text, 0)
        except ValueError:
            return -1

    @staticmethod
    def attr_string(args: list[Token]) -> str:
        parts = []
        for t in args:
            if t.kind == "string":
                body = t.text[t.text.index('"') + 1 : -1]
                parts.append(body.encode().decode("unicode_escape"))
        return "".join(parts)

    def statement_start(self, i: int) -> int:
        """First token of the statement/declaration containing token i."""
        k = i - 1
        while k >= 0 and self.toks[k].text not in (";", "{", "}"):
            if self.toks[k].text in (")", "]"):
                # skip back over a bracketed group
                depth = 0
                while k >= 0:
                    if self.toks[k].text in (")", "]"):
                        depth += 1
                    elif self.toks[k].text in ("(", "["):
                        depth -= 1
                        if depth == 0:
                            break
                    k -= 1
            k -= 1
        return k + 1

    def statement_end(self, i: int) -> int:
        """Index of the ';' ending the statement that starts at i (brackets skipped)."""
        k = i
        while k < len(self.toks) and self.toks[k].text != ";":
            if self.toks[k].text in ("(", "[", "{"):
                k = self.match_close(k)
            k += 1
        return k

    def split_params(self, open_i: int, close_i: int) -> list[tuple[int, int]]:
        return self.split_top(open_i + 1, close_i)

    def split_top(self, start: int, stop: int) -> list[tuple[int, int]]:
        """Token ranges of start..stop-1 split at top-level commas (outside
        brackets and template argument lists)."""
        parts = []
        first = start
        k = start
        angle = 0
        while k < stop:
            t = self.toks[k].text
            if t in ("(", "[", "{"):
                k = self.match_close(k)
            elif t == "<" and k > start and self.toks[k - 1].kind == "ident":
                angle += 1
            elif t == ">" and angle > 0:
                angle -= 1
            elif t == ">>" and angle > 0:
                angle = max(0, angle - 2)
            elif t == "," and angle == 0:
                parts.append((first, k))
                first = k + 1
            k += 1
        if first < stop:
            parts.append((first, stop))
        return parts
