"""The top-level layout of a kernels/*.metal file: items, macros, registrations.

What `aten add` needs to edit a file like PyTorch's UnaryKernel.metal surgically
and what verification needs to compile only one op of it. This is layout, not
C++: clang compiles the result; here a file is a sequence of top-level *items*:

- `include` / `using` / `define` / `directive` lines (backslash continuations joined);
- `invocation`: a file-scope `MACRO(args);` statement (`REGISTER_UNARY_OP(exp, float,
  float);`, `REGISTER_FLOAT_BINARY_OP(add);`, `DEFINE_UNARY_FLOATING_FUNCTOR(erf);`);
- `instantiation`: an explicit `template [[host_name("...")]] kernel ...;`;
- `definition`: anything else (a functor struct, a helper function or constant, a
  kernel template), named by the identifier it declares.

Comment lines directly above an item (blank lines between them included) belong to
it, so moving or deleting an item takes its comment along. An invocation or
instantiation is a *registration* when it expands (through the file's own
`#define`s and the c10/metal headers') to kernels: `Leaf`s, each one call of
c10/metal's registration API (`REGISTER_UNARY_OP(exp, float, float)`: a header
REGISTER_*(NAME, IN, ...) macro) or instantiation text whose host names are known.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

_IDENT = re.compile(r"[A-Za-z_]\w*")
_DEFINE = re.compile(r"#\s*define\s+(?P<name>\w+)(?P<params>\([^)]*\))?(?P<body>.*)", re.S)
_INVOCATION = re.compile(r"(?P<macro>[A-Z_][A-Z0-9_]*)\s*\((?P<args>.*)\)\s*;?\s*$", re.S)
_STRUCT = re.compile(r"\b(?:struct|class|union|enum)\s+(?P<name>\w+)")
_HOST_NAME = re.compile(r"host_name\s*\((?P<parts>[^)]*)\)")


@dataclass
class Item:
    kind: str  # include, using, define, directive, invocation, instantiation, definition
    first: int  # 0-based first line (leading comments included)
    code: int  # 0-based first line of the code itself
    last: int  # 0-based last line, inclusive
    text: str  # the item's lines, comments included
    name: str | None = None  # declared name (definition), macro name (define, invocation)
    args: list[str] = field(default_factory=list)  # invocation arguments

    @property
    def code_text(self) -> str:
        return "\n".join(self.text.splitlines()[self.code - self.first:])


@dataclass(frozen=True)
class Macro:
    name: str
    params: tuple[str, ...] | None  # None: object-like
    body: str
    in_file: bool  # defined by the file itself (not a c10/metal header)

    @property
    def instantiates(self) -> bool:
        return "host_name" in self.body

    @property
    def is_registration_api(self) -> bool:
        """c10/metal's REGISTER_*(NAME, IN, ...) macros: the leaves every registration reaches."""
        return not self.in_file and self.name.startswith("REGISTER_") and self.params is not None


@dataclass(frozen=True)
class Leaf:
    """One kernel-instantiating call: a header REGISTER_* macro, or explicit instantiation text."""

    text: str  # `REGISTER_UNARY_OP(exp, float, float)` or the substituted instantiation
    macro: str | None  # the header macro; None for explicit instantiation text
    args: tuple[str, ...] = ()
    host_names: tuple[str, ...] = ()

    @property
    def family(self) -> str | None:
        """The kernel family (functor name without `_functor`) of a REGISTER_* leaf."""
        return self.args[0] if self.macro and self.args else None

    @property
    def input_type(self) -> str | None:
        """The Metal input type of a REGISTER_*(NAME, IN, ...) leaf."""
        return self.args[1] if self.macro and len(self.args) > 1 else None

    def belongs_to(self, kernel: str) -> bool:
        """A REGISTER_* leaf of family `kernel`, or instantiations named as the TensorIterator
        host code looks kernels up: `<kernel>_dense...` / `<kernel>_strided...`."""
        if self.family is not None:
            return self.family == kernel
        return bool(self.host_names) and all(h.startswith((f"{kernel}_dense", f"{kernel}_strided"))
                                             for h in self.host_names)


# --- lexing -------------------------------------------------------------------------------------

def _logical_lines(lines: list[str], i: int) -> int:
    """Last physical line of the preprocessor line starting at `i` (backslash continuations)."""
    while lines[i].rstrip().endswith("\\") and i + 1 < len(lines):
        i += 1
    return i


def _scan_statement(lines: list[str], i: int) -> int:
    """Last line of the top-level statement or definition starting at line `i`.

    Tracks comments, string and character literals and bracket depth; a statement
    ends at `;` at depth 0, a definition at a `}` closing depth 0 that ends its line.
    """
    depth, in_block = 0, False
    for n in range(i, len(lines)):
        line, k = lines[n], 0
        while k < len(line):
            c = line[k]
            if in_block:
                end = line.find("*/", k)
                if end < 0:
                    break
                in_block, k = False, end + 2
                continue
            if line.startswith("//", k):
                break
            if line.startswith("/*", k):
                in_block, k = True, k + 2
                continue
            if c in "\"'":
                close = k + 1
                while close < len(line) and line[close] != c:
                    close += 2 if line[close] == "\\" else 1
                k = close + 1
                continue
            if c in "({[":
                depth += 1
            elif c in ")]}":
                depth -= 1
                if c == "}" and depth == 0:
                    rest = line[k + 1:].strip()
                    if not rest or rest.startswith("//"):
                        return n  # a function or namespace body; `};` and `} x;` go on to the `;`
            elif c == ";" and depth == 0:
                return n
            k += 1
    return len(lines) - 1


def _is_comment(line: str) -> bool:
    s = line.strip()
    return s.startswith("//") or s.startswith("/*") or s.startswith("*")


def _classify(code: str) -> tuple[str, str | None, list[str]]:
    s = code.strip()
    if s.startswith("#"):
        directive = s[1:].lstrip()
        if directive.startswith("include"):
            return "include", None, []
        m = _DEFINE.match(s)
        if m:
            return "define", m["name"], []
        return "directive", None, []
    if s.startswith("using "):
        return "using", None, []
    if re.match(r"template\s*\[\[\s*host_name", s):
        return "instantiation", None, []
    m = _INVOCATION.match(s)
    if m and s.rstrip().endswith(";"):
        return "invocation", m["macro"], split_args(m["args"])
    return "definition", _declared_name(s), []


def _declared_name(code: str) -> str | None:
    head = code.split("{", 1)[0]
    head = re.sub(r"template\s*<[^{]*?>\s*(?=[A-Za-z_])", "", head, count=1)
    m = _STRUCT.search(head)
    if m and "(" not in head.split(m["name"], 1)[0]:
        return m["name"]
    m = re.search(r"(\w+)\s*(?:\[[^\]]*\])?\s*(?:\(|=|;|$)", head)
    return m.group(1) if m else None


def split_items(text: str) -> list[Item]:
    lines = text.splitlines()
    items: list[Item] = []
    i, pending = 0, None  # pending: first line of a comment block waiting for its item
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if _is_comment(line) and not line.strip().startswith("*/"):
            if pending is None:
                pending = i
            if line.strip().startswith("/*") and "*/" not in line:
                while i < len(lines) and "*/" not in lines[i]:
                    i += 1
            i += 1
            continue
        last = _logical_lines(lines, i) if line.lstrip().startswith("#") else _scan_statement(lines, i)
        first = pending if pending is not None else i
        code = "\n".join(lines[i:last + 1])
        kind, name, args = _classify(code.replace("\\\n", "\n"))
        items.append(Item(kind, first, i, last, "\n".join(lines[first:last + 1]), name, args))
        pending, i = None, last + 1
    return items


def split_args(text: str) -> list[str]:
    """Comma-separated macro arguments at bracket depth 0."""
    args, depth, cur = [], 0, []
    for c in text:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        args.append("".join(cur).strip())
    return args


# --- macros ------------------------------------------------------------------------------------

def _macro_from_define(code: str, in_file: bool) -> Macro | None:
    m = _DEFINE.match(code.replace("\\\n", " ").strip())
    if not m:
        return None
    params = tuple(p.strip() for p in m["params"][1:-1].split(",") if p.strip()) if m["params"] else None
    return Macro(m["name"], params, m["body"].strip(), in_file)


@lru_cache(maxsize=16)
def _header_macros(headers_dir: str, stamp: tuple) -> dict[str, Macro]:
    macros: dict[str, Macro] = {}
    for path in sorted(Path(headers_dir).glob("*.h")):
        lines = path.read_text(errors="replace").splitlines()
        i = 0
        while i < len(lines):
            if lines[i].lstrip().startswith("#"):
                last = _logical_lines(lines, i)
                macro = _macro_from_define("\n".join(lines[i:last + 1]), in_file=False)
                if macro is not None:
                    macros.setdefault(macro.name, macro)
                i = last + 1
            else:
                i += 1
    return macros


def header_macros(c10_metal: Path) -> dict[str, Macro]:
    """Every `#define` of the c10/metal headers (REGISTER_UNARY_OP, INSTANTIATE_FOR_FLOAT_TYPES, ...)."""
    d = Path(c10_metal)
    stamp = tuple((p.name, p.stat().st_mtime_ns) for p in sorted(d.glob("*.h"))) if d.is_dir() else ()
    return _header_macros(str(d), stamp)


def substitute(body: str, params: tuple[str, ...], args: list[str]) -> str:
    """A function-like macro body with `args` for `params`: `#P` stringizes, `##` pastes."""
    values = dict(zip(params, args))
    out = re.sub(r"(?<!#)#\s*(\w+)", lambda m: f'"{values[m[1]]}"' if m[1] in values else m[0], body)
    out = _IDENT.sub(lambda m: values.get(m[0], m[0]), out)
    return re.sub(r"\s*##\s*", "", out)


def _statements(body: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for c in body:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == ";" and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur).strip())
    return [p for p in parts if p]


def host_names(text: str) -> tuple[str, ...]:
    """The `[[host_name(...)]]` strings of instantiation text (string literals concatenated)."""
    names = []
    for m in _HOST_NAME.finditer(text):
        names.append("".join(re.findall(r'"([^"]*)"', m["parts"])))
    return tuple(names)


class MetalFile:
    """A kernels/*.metal text split into items, with the macros it can use."""

    def __init__(self, text: str, c10_metal: Path | None = None):
        self.text = text
        self.lines = text.splitlines()
        self.items = split_items(text)
        self.macros = dict(header_macros(c10_metal)) if c10_metal is not None else {}
        for item in self.items:
            if item.kind == "define":
                macro = _macro_from_define(item.code_text, in_file=True)
                if macro is not None:
                    self.macros[macro.name] = macro

    def leaves(self, statement: str, depth: int = 0) -> list[Leaf]:
        """The kernel-instantiating calls one statement expands to ([] if none)."""
        s = statement.strip().rstrip(";").strip()
        if depth > 16:
            return []
        if re.match(r"template\s*\[\[\s*host_name", s):
            return [Leaf(s, None, (), host_names(s))]
        m = _INVOCATION.match(s)
        if not m or m["macro"] not in self.macros:
            return []
        macro, args = self.macros[m["macro"]], split_args(m["args"])
        if macro.params is None:
            return []
        if macro.is_registration_api:
            return [Leaf(f"{macro.name}({', '.join(args)})", macro.name, tuple(args))]
        body = substitute(macro.body, macro.params, args)
        if macro.instantiates and not _INVOCATION.match(body.strip()):
            return [Leaf(body, None, (), host_names(body))]
        found = []
        for part in _statements(body):
            found += self.leaves(part, depth + 1)
        return found

    def registrations(self) -> list[tuple[Item, list[Leaf]]]:
        """Every invocation/instantiation item that instantiates kernels, with its leaves."""
        out = []
        for item in self.items:
            if item.kind in ("invocation", "instantiation"):
                leaves = self.leaves(item.code_text.replace("\\\n", " "))
                if leaves:
                    out.append((item, leaves))
        return out

    def per_name_macros(self, register_macro: str) -> list[tuple[Macro, list[Leaf]]]:
        """The file's own one-parameter registration macros built from `register_macro`
        (REGISTER_FLOAT_BINARY_OP(NAME) -> REGISTER_BINARY_OP(NAME, float, float); ...),
        each expanded for a placeholder name."""
        placeholder = "mk_placeholder_op"
        found = []
        for macro in self.macros.values():
            if not macro.in_file or macro.params is None or len(macro.params) != 1:
                continue
            leaves = self.leaves(f"{macro.name}({placeholder})")
            if leaves and all(l.macro == register_macro and l.family == placeholder for l in leaves):
                found.append((macro, leaves))
        return found
