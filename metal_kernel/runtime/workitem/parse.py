"""Parsing: the text of a per-thread function into a Function (blocks of
Inst, every local renamed so that the names the later stages generate never
collide)."""

from __future__ import annotations

import re

from ..ir import _GLOBAL, _LABEL_LINE, _LOCAL, _TOKEN, Unsupported, _name, _ref, _split_top
from .ir_model import Block, Function, Inst


def parse(fn: Function):
    """Reads the per-thread function's header and blocks into `fn`."""
    lines = fn.mod.body(fn.fname)
    header = lines[0]
    m = re.match(r"define (.*?)(" + _GLOBAL + r")\((.*)\)(.*)\{\s*$", header)
    if not m:
        raise Unsupported("cannot parse the per-thread function's header")
    params = _split_top(m.group(3))
    fn.param_names = []
    for p in params:
        toks = re.findall(_LOCAL, p)
        if not toks:
            raise Unsupported("unnamed parameter")
        fn.param_names.append(_name(toks[-1]))
    if len(fn.param_names) != 5:
        raise Unsupported("unexpected per-thread signature")
    am = re.search(r"#(\d+)", m.group(4))
    fn.attr_group = am.group(1) if am else None
    # Rename every local to 'v<name>' so generated names ('mk.*') never
    # collide and numbered values need no renumbering.
    body = lines[1:-1]
    entry_label = None
    first = next((ln for ln in body if ln.strip() and not ln.lstrip().startswith(";")), "")
    named_entry = _LABEL_LINE.match(first)
    if named_entry:
        # The optimiser may name the entry block (a block it merged
        # into it, as '_Z11ndtri_valuef.exit:'): that label is the entry.
        entry_label = named_entry.group(1).strip('"')
    elif all(p.isdigit() for p in fn.param_names):
        entry_label = str(len(fn.param_names))
    else:
        entry_label = "entry.mk"
    # First pass: labels.
    labels = []
    for ln in body:
        lm = _LABEL_LINE.match(ln)
        if lm:
            labels.append(lm.group(1).strip('"'))
    type_names = fn.locals.type_names

    def rn(name: str) -> str:
        return "v" + name

    def rename_text(text: str) -> str:
        def repl(mm):
            tok = mm.group(0)
            if tok[0] != "%":
                return tok
            nm = _name(tok)
            if nm in type_names:
                return tok
            return _ref(rn(nm))
        return _TOKEN.sub(repl, text)

    fn.locals.labels = {rn(lb) for lb in labels} | {rn(entry_label)}
    fn.params = [rn(p) for p in fn.param_names]
    fn.g, fn.x, fn.y, fn.z, fn.lin = fn.params
    blocks: list[Block] = []
    cur = Block(rn(entry_label))
    blocks.append(cur)
    pending = None  # multi-line instruction (switch)
    for ln in body:
        if pending is not None:
            pending.append(ln)
            if ln.strip() == "]":
                cur.insts.append(Inst(rename_text("\n".join(pending)), fn.locals))
                pending = None
            continue
        if not ln.strip() or ln.lstrip().startswith(";"):
            continue
        lm = _LABEL_LINE.match(ln)
        if lm:
            if named_entry and ln is first:
                continue  # the entry block, made above
            cur = Block(rn(lm.group(1).strip('"')))
            blocks.append(cur)
            continue
        text = ln.rstrip()
        # Comments after an instruction (rare in clang output).
        if re.match(r"\s*switch ", text) and text.endswith("["):
            pending = [text]
            continue
        cur.insts.append(Inst(rename_text(text), fn.locals))
    fn.blocks = {b.label: b for b in blocks}
    fn.order = [b.label for b in blocks]
    fn.entry = blocks[0].label
    for b in blocks:
        for ins in b.insts:
            ins.block = b.label
