"""Host-recipe vocabulary: each piece holds its Objective-C++ text and its Python meaning.

A custom-kernel recipe (take_host.py) states once every part of its host function
that could drift between the generated `.mm` and the Python twin: argument checks
with their messages, the kernel name, the argument binding order, the grid. The
`.mm` is rendered from `.cpp` text; the twin evaluates `.py` on a namespace holding
the host function's locals under the same names (`self`, `index_`, `output`, ...).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

# TORCH_CHECK* macro -> the Python exception ATen raises for it.
CHECK_ERRORS: dict[str, type[Exception]] = {
    "TORCH_CHECK": RuntimeError,
    "TORCH_CHECK_INDEX": IndexError,
    "TORCH_CHECK_VALUE": ValueError,
    "TORCH_CHECK_TYPE": TypeError,
}


@dataclass(frozen=True)
class Expr:
    cpp: str
    py: Callable[[Any], Any]  # of the host locals


def _cpp_piece(piece: str | Expr) -> str:
    return piece.cpp if isinstance(piece, Expr) else json.dumps(piece)


def _py_piece(piece: str | Expr, v) -> str:
    return str(piece.py(v)) if isinstance(piece, Expr) else piece


@dataclass(frozen=True)
class Text:
    """Literal strings and expressions, concatenated."""

    pieces: tuple[str | Expr, ...]

    def cpp_concat(self) -> str:  # "a" + x + "b" (x a std::string)
        return " + ".join(_cpp_piece(p) for p in self.pieces)

    def py(self, v) -> str:
        return "".join(_py_piece(p, v) for p in self.pieces)


@dataclass(frozen=True)
class Check:
    macro: str
    condition: Expr
    message: Text

    def cpp(self, indent: int = 2) -> str:
        args = [self.condition.cpp, *(_cpp_piece(p) for p in self.message.pieces)]
        return cpp_call(self.macro, args, indent) + ";"

    def enforce(self, v) -> None:
        if not self.condition.py(v):
            raise CHECK_ERRORS[self.macro](self.message.py(v))


def cpp_args(exprs: tuple[Expr, ...]) -> str:
    return ", ".join(e.cpp for e in exprs)


def cpp_call(callee: str, args: list[str], indent: int = 2, limit: int = 80) -> str:
    """`callee(args)` laid out as clang-format does in PyTorch (80 columns, no bin-packing)."""
    pad = " " * indent
    one = f"{pad}{callee}({', '.join(args)})"
    if len(one) + 1 <= limit:
        return one
    return f"{pad}{callee}(\n" + ",\n".join(f"{pad}    {a}" for a in args) + ")"
