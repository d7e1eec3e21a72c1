"""Threadgroup storage declared in kernel bodies: `threadgroup T a[n], b;`
becomes references to the group's memory, which the runtime hands out per
declaration (mk::tg_ref, one slot each), so all threads of a group see the
same block."""

from __future__ import annotations

from .lexer import TokenView


class ThreadgroupStorage(TokenView):
    """Scans kernel bodies (attributes in them go through the rewriter's
    handle_attribute)."""

    tg_slot: int

    def scan_body(self, open_i: int, close_i: int):
        k = open_i + 1
        while k < close_i:
            t = self.toks[k]
            if self.is_attr_open(k):
                k = self.handle_attribute(k, True)
                continue
            if t.kind == "ident" and t.text == "threadgroup":
                k = self.handle_threadgroup(k)
                continue
            k += 1

    def handle_threadgroup(self, i: int) -> int:
        """`threadgroup T a[4], b = {...};` in a body -> references to the
        group's memory. An initializer is accepted and not applied, as on
        Apple GPUs (features.py)."""
        toks = self.toks
        prev = toks[i - 1].text if i > 0 else ";"
        if prev not in (";", "{", "}", ":", ")"):
            return i + 1  # a qualifier inside an expression or a cast
        end = self.statement_end(i + 1)
        declarators = self.split_top(i + 1, end)
        if not declarators:
            return i + 1
        first = declarators[0]
        # The type ends before the first declarator's name: the last
        # identifier of the first part that is followed by '[', '=', or the end.
        spec_end = None
        angle = 0
        for q in range(first[0], first[1]):
            tx = toks[q].text
            if tx == "<":
                angle += 1
            elif tx in (">", ">>"):
                angle -= len(tx)
            elif tx in ("*", "&", "&&", "("):
                if angle == 0:
                    return i + 1  # pointer/reference to threadgroup memory: just a qualifier
            elif toks[q].kind == "ident" and angle == 0 and \
                    (q + 1 == first[1] or toks[q + 1].text in ("[", "=", "{")):
                spec_end = q
                break
        if spec_end is None or spec_end == first[0]:
            return i + 1
        spec = " ".join(t for t in self.tokens_text(first[0], spec_end).split(" ") if t != "const")
        out = []
        for n, (a, b) in enumerate(declarators):
            name_at = spec_end if n == 0 else a
            if toks[name_at].kind != "ident" or any(toks[q].text in ("*", "&") for q in range(a, name_at)):
                return i + 1
            q = name_at + 1
            while q < b and toks[q].text == "[":
                q = self.match_close(q) + 1
            dims = self.tokens_text(name_at + 1, q)
            out.append(f"auto& {toks[name_at].text} = ::mk::tg_ref<{spec}{dims}>({self.tg_slot}u);")
            self.tg_slot += 1
        self.blank(i, end + 1, " ".join(out))
        return end + 1
