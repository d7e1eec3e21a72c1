"""Tokens of preprocessed C++/MSL text, with their offsets, plus line mapping.

The rewriter works on the output of the preprocessor, so there are no
comments or macros left; what remains is identifiers, numbers, literals,
punctuation and the `# N "file"` line markers clang emits.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

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
    """,
    re.VERBOSE | re.MULTILINE,
)

_MARKER = re.compile(r'^#\s*(?:line\s+)?(\d+)\s+"((?:\\.|[^"\\])*)"')


@dataclass(frozen=True)
class Token:
    kind: str  # ident, number, string, char, punct, marker
    text: str
    start: int
    end: int


def tokenize(text: str) -> list[Token]:
    tokens = []
    pos = 0
    n = len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            # Anything unexpected becomes a one-character punctuator; the
            # compiler will report it with a proper location.
            tokens.append(Token("punct", text[pos], pos, pos + 1))
            pos += 1
            continue
        kind = m.lastgroup
        if kind == "delim":
            kind = "string"
        if kind != "space":
            tokens.append(Token(kind, m.group(0), m.start(), m.end()))
        pos = m.end()
    return tokens


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
