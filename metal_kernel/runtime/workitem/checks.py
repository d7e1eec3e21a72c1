"""Checks: whether a per-thread function synchronises at all, and whether
it holds anything the cut cannot handle (which leaves the kernel on
fibers)."""

from __future__ import annotations

import re

from ..ir import _GLOBAL, Unsupported, _name, parse_call
from .abi import SYNC_MARKERS, TG_ALLOC, THREAD_INDEX
from .ir_model import _UNSUPPORTED_OPS, Function, Inst


class CallChecker:
    """The calls of one function against what the cut supports. A call of a
    function that synchronises but was not inlined is collected in
    `force_inline` (the caller inlines it and tries again)."""

    def __init__(self, fn: Function, sync_funcs: set[str], force_inline: set[str]):
        self.fn = fn
        self.sync_funcs = sync_funcs
        self.force_inline = force_inline

    def synchronises(self) -> bool:
        """Whether the function calls a synchronising marker or a function
        that may reach one."""
        for lb in self.fn.order:
            for ins in self.fn.blocks[lb].insts:
                if ins.op == "call":
                    for tok in re.findall(_GLOBAL, ins.text):
                        nm = _name(tok)
                        if nm in SYNC_MARKERS or nm in self.sync_funcs:
                            return True
        return False

    def _runtime_service(self, callee: str, defs: dict[str, Inst]) -> bool:
        """An indirect call through the runtime's table (__mk_rt) to a service
        that neither synchronises nor depends on the running thread: fail
        (division-by-zero reports) and threadgroup_alloc."""
        d = defs.get(_name(callee))
        if d is None or d.op != "load" or len(d.uses) != 1:
            return False
        p = defs.get(d.uses[0])
        if p is None:
            return False
        if p.op == "getelementptr" and len(p.uses) == 1:
            m = re.search(r",\s*i64 (\d+)\s*$", p.rest)
            if not m or not p.rest.startswith("getelementptr inbounds nuw i8, ptr") and \
                    not p.rest.startswith("getelementptr inbounds i8, ptr"):
                return False
            offset = int(m.group(1))
            base = defs.get(p.uses[0])
        else:
            return False
        if base is None or base.op != "load" or not re.match(r"load ptr, ptr @__mk_rt\b", base.rest):
            return False
        return offset in (24, 32)  # RuntimeApi::threadgroup_alloc, ::fail (mk/abi.h)

    def check_and_classify_calls(self) -> bool:
        """Raises Unsupported for what the transform cannot cut; returns
        whether the function synchronises at all."""
        syncs = False
        defs = {i.name: i for lb in self.fn.order for i in self.fn.blocks[lb].insts if i.name}
        for lb in self.fn.order:
            for ins in self.fn.blocks[lb].insts:
                if ins.op in _UNSUPPORTED_OPS:
                    raise Unsupported(f"'{ins.op}' instruction")
                if ins.op == "alloca" and lb != self.fn.entry:
                    raise Unsupported("alloca outside the entry block (dynamic stack allocation)")
                if ins.op != "call":
                    if "blockaddress" in ins.text:
                        raise Unsupported("blockaddress")
                    continue
                c = parse_call(ins.rest)
                ins.call = c
                if c.callee == "asm":
                    raise Unsupported("inline assembly")
                if c.callee.startswith("%"):
                    if self._runtime_service(c.callee, defs):
                        continue
                    raise Unsupported(f"indirect call: {ins.text.strip()[:120]}")
                name = _name(c.callee)
                if "musttail" in ins.text.split("call")[0]:
                    raise Unsupported("musttail call")
                if name in SYNC_MARKERS:
                    syncs = True
                elif name in (THREAD_INDEX, TG_ALLOC):
                    pass
                elif name in self.sync_funcs:
                    self.force_inline.add(name)
                elif name.startswith("llvm.") and re.match(
                        r"llvm\.(stacksave|stackrestore|localescape|localrecover|eh\.|"
                        r"coro\.|icall|call\.preallocated|experimental\.gc)", name):
                    raise Unsupported(f"intrinsic {name}")
        if self.force_inline:
            raise Unsupported("calls functions that synchronise and were not inlined: "
                              + ", ".join(sorted(self.force_inline)))
        return syncs
