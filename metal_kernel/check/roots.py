"""The root of a pointer in a per-thread function: the object it was
derived from (a buffer, a threadgroup variable or parameter, a private
array, a program-scope constant, the runtime's own data) or unknown."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..runtime.ir import _DEF, _GLOBAL, _LOCAL, Unsupported, _name, _split_top, parse_call, parse_type
from ..runtime.ir_layout import Layout

GROUP_INFO = 0xFFFFFFFF  # MK_TG_GROUP_INFO (mk/abi.h)
_DBG_STRIP = re.compile(r",\s*!dbg !\d+")
_END = r"(?![-\w.$])"  # the end of a value name

@dataclass(frozen=True)
class Root:
    kind: str  # "buf", "tg", "tgp", "priv", "glob", "g", "unknown"
    index: int = -1  # buffer / threadgroup slot / parameter index
    base: str = ""   # the SSA value or global of the object (tg, priv, glob)
    size: int = 0    # static size of the object (tg, priv, glob)


UNKNOWN = Root("unknown")
PENDING = Root("pending")  # a phi being resolved (a loop)
_ORDERINGS = re.compile(r"\s+(unordered|monotonic|acquire|release|acq_rel|seq_cst)\b.*$")
_SYNCSCOPE = re.compile(r'\s*syncscope\("[^"]*"\)')


def _operand_value(part: str) -> str:
    """'ptr %x monotonic' / 'ptr noundef %x' -> '%x' (constant expressions kept whole)."""
    p = _SYNCSCOPE.sub("", part.strip())
    p = _ORDERINGS.sub("", p)
    if p.startswith("ptr"):
        p = p[3:].strip()
    p = re.sub(r"^(noundef|nonnull|align \d+|readonly|writeonly|noalias)\s+", "", p)
    return p.strip()


def _base_of_gep(text: str) -> str:
    """The pointer operand of a getelementptr instruction or expression."""
    body = text
    m = re.search(r"getelementptr\s*(?:(?:inbounds|nuw|nusw|inrange\(\d+, \d+\))\s+)*\(?", body)
    rest = body[m.end():]
    if rest.endswith(")") and body[m.end() - 1] == "(":
        rest = rest[:-1]
    parts = _split_top(rest)
    return _operand_value(parts[1]) if len(parts) > 1 else ""


class Function:
    """One per-thread function, instrumented."""

    def __init__(self, lines: list[str], layout: Layout, globals_: dict[str, str]):
        self.lines = lines
        self.layout = layout
        self.globals = globals_  # name -> definition line
        header = lines[0]
        m = re.match(r"define (.*?)(" + _GLOBAL + r")\((.*)\)(.*)\{\s*$", header)
        if not m:
            raise Unsupported("cannot parse a per-thread function's header")
        params = []
        for p in _split_top(m.group(3)):
            toks = re.findall(_LOCAL, p)
            if not toks:
                raise Unsupported("unnamed parameter")
            params.append(toks[-1])
        if len(params) != 5:
            raise Unsupported("unexpected per-thread signature")
        self.g, self.lin = params[0], params[4]
        self.params = params
        self.defs: dict[str, str] = {}
        for ln in lines[1:-1]:
            dm = _DEF.match(ln)
            if dm:
                self.defs[dm.group(1)] = ln[dm.end():].strip()
        self.memo: dict[str, Root] = {}
        self.tmp = 0

    # -- roots --
    def root(self, v: str) -> Root:
        """The root of pointer `v` (cycles through phis resolve to what
        enters them)."""
        v = v.strip()
        if v in self.memo:
            return self.memo[v]
        self.active: set[str] = set()
        self.open_cycle = False
        r = self._root(v, 0)
        self.memo[v] = r if r is not PENDING else UNKNOWN
        return self.memo[v]

    def _sub(self, v: str, depth: int) -> Root:
        v = v.strip()
        if v in self.memo:
            return self.memo[v]
        if v in self.active:
            self.open_cycle = True
            return PENDING
        if depth > 200:
            return UNKNOWN
        self.active.add(v)
        r = self._root(v, depth)
        self.active.discard(v)
        if not self.open_cycle or not self.active:
            self.memo[v] = r  # only results no open cycle could still change
        return r

    def _root(self, v: str, depth: int) -> Root:
        if v == self.g:
            return Root("g")
        if v.startswith("@"):
            return self._global(v)
        if v.startswith("getelementptr"):
            return self._sub(_base_of_gep(v), depth + 1)
        if v.startswith(("bitcast", "addrspacecast")):
            m = re.search(r"\(\s*ptr\s+(.*?)\s+to\s+ptr", v)
            return self._sub(m.group(1), depth + 1) if m else UNKNOWN
        if not v.startswith("%"):
            return UNKNOWN
        d = self.defs.get(v)
        if d is None:
            return UNKNOWN
        d = _DBG_STRIP.sub("", d)
        op = d.split(None, 1)[0]
        if op == "getelementptr":
            return self._sub(_base_of_gep(d), depth + 1)
        if op in ("bitcast", "addrspacecast"):
            m = re.match(r"\w+\s+ptr\s+(\S+)\s+to", d)
            return self._sub(m.group(1), depth + 1) if m else UNKNOWN
        if op == "phi":
            _, i = parse_type(d, 3)
            vals = [_split_top(item.strip()[1:-1])[0] for item in _split_top(d[i:])]
            return self._join([self._sub(x, depth + 1) for x in vals])
        if op == "select":
            parts = _split_top(d[len("select"):])
            if len(parts) == 3:
                return self._join([self._sub(_operand_value(parts[1]), depth + 1),
                                   self._sub(_operand_value(parts[2]), depth + 1)])
            return UNKNOWN
        if op == "alloca":
            return self._alloca(v, d)
        if op == "load":
            # A pointer read from the runtime's own structures (the WiGroup,
            # the runtime's table) points into the runtime.
            parts = _split_top(re.sub(r"^load\s+(atomic\s+)?(volatile\s+)?", "", d))
            src = self._sub(_operand_value(parts[1]), depth + 1).kind if len(parts) > 1 else ""
            if src == "g":
                return Root("g")
            if src == "groupinfo" and parts[0].strip() == "ptr":
                # The group record's one pointer, tg_buffer0 (mk/abi.h GroupInfo):
                # [[threadgroup(0)]]'s storage, CUDA's dynamic shared memory.
                return Root("tgp", 0)
            return UNKNOWN
        if "call" in d.split("(")[0]:
            try:
                c = parse_call(d)
            except Unsupported:
                return UNKNOWN
            name = _name(c.callee) if c.callee.startswith("@") else ""
            vals = [x for _, x in c.args]
            if name == "__mk_chk_buffer" and len(vals) == 2 and vals[1].isdigit():
                return Root("buf", int(vals[1]))
            if name == "__mk_chk_tgparam" and len(vals) == 2 and vals[1].isdigit():
                return Root("tgp", int(vals[1]))
            if name == "__mk_tg_alloc" and len(vals) == 3 and all(re.fullmatch(r"-?\d+", x) for x in vals):
                slot = int(vals[0]) & 0xFFFFFFFF
                if slot == GROUP_INFO:
                    return Root("groupinfo")  # the runtime's record of the running group (read-only)
                return Root("tg", slot, v, int(vals[1]))
        return UNKNOWN

    def _join(self, roots: list[Root]) -> Root:
        """The common root of a phi's or select's operands (a pending one,
        inside a cycle, takes whatever the others have)."""
        real = [r for r in roots if r is not PENDING]
        if not real:
            return PENDING
        first = real[0]
        return first if all(r == first for r in real) else UNKNOWN

    def _alloca(self, v: str, d: str) -> Root:
        m = re.match(r"alloca\s+(?:inalloca\s+)?(.*?)(?:,\s*(i\d+)\s+(\S+))?(?:,\s*align \d+)?(?:,.*)?$", d)
        if not m:
            return UNKNOWN
        try:
            t, _ = parse_type(m.group(1), 0)
            size = self.layout.size_align(t)[0]
        except Unsupported:
            return UNKNOWN
        if m.group(3):
            if not m.group(3).isdigit():
                return UNKNOWN
            size *= int(m.group(3))
        return Root("priv", -1, v, size)

    def _global(self, v: str) -> Root:
        name = _name(v)
        if name.startswith(("__mk", "_ZN2mk", ".")) or name.startswith("_ZN5metal"):
            return Root("g")  # the runtime's own data: not checked
        d = self.globals.get(name)
        if d is None:
            return UNKNOWN
        m = re.search(r"\b(?:global|constant)\s+", d)
        if not m:
            return UNKNOWN
        try:
            t, _ = parse_type(d, m.end())
            size = self.layout.size_align(t)[0]
        except Unsupported:
            return UNKNOWN
        return Root("glob", -1, v, size)
