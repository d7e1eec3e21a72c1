"""One per-thread function through the compiler's stages, in order: parse,
check, cut, analyse, emit. PerThread only sequences them and keeps what one
stage hands the next (the Function, its Analysis, the step functions'
exits); each stage lives in its own module."""

from __future__ import annotations

import re

from ..ir import Module, _ref
from .analysis import Analysis
from .checks import CallChecker
from .cut import Cutter
from .emit_layout import descriptor_text, types_text
from .emit_loop import loop_text
from .emit_steps import StepEmitter
from .ir_model import Block, Function
from .loop_points import insert as insert_loop_points
from .parse import parse
from .prefix_guard import Guard, prefix_guard, step_functions
from .privatise import Privatisation
from .run_invariance import run_invariant
from .uniformity import affine_counters, affine_values, uniform_candidates


class PerThread:
    """One per-thread function, cut into step functions."""

    def __init__(self, mod: Module, sym: int, sync_funcs: set[str], uniform: bool = False, row_jam: int = 1,
                 loop_points: bool = False):
        self.fn = Function(mod, sym, uniform)
        self.loop_points = loop_points  # resume points in strided loops (loop_points.py)
        self.row_jam = row_jam  # rows run together (emit_loop._jammed_rows), where the steps read y
        self.sync_funcs = sync_funcs
        self.force_inline: set[str] = set()  # synchronising callees not inlined (check_and_classify_calls)
        self.analysis = Analysis(self.fn)
        self.ai_group: str | None = None    # attributes of the step functions
        self.loop_group: str | None = None  # and of the loop function
        self.exits: list[set[int]] = []  # per step function (emit)
        self.guards: dict[int, Guard] = {}  # regions only the first threads work in (emit)
        self.reads_y = False  # a step reads the thread's y (emit)

    # What the caller and tests read of the parsed function.
    @property
    def attr_group(self) -> str | None:
        return self.fn.attr_group

    @property
    def blocks(self) -> dict[str, Block]:
        return self.fn.blocks

    @property
    def order(self) -> list[str]:
        return self.fn.order

    @property
    def entry(self) -> str:
        return self.fn.entry

    # ------------------------------------------------------ parse, check --
    def parse(self):
        parse(self.fn)

    def synchronises(self) -> bool:
        return CallChecker(self.fn, self.sync_funcs, self.force_inline).synchronises()

    def check_and_classify_calls(self) -> bool:
        return CallChecker(self.fn, self.sync_funcs, self.force_inline).check_and_classify_calls()

    def cut_and_analyse(self):
        """Everything between parse and emit, in order (transform's path)."""
        if self.loop_points:
            insert_loop_points(self.fn)
        self.check_and_classify_calls()
        self.lower_markers()
        self.build_cfg()
        self.order_syncs()
        self.liveness()
        self.classify()
        self.privatise()
        self.uniform_candidates()

    # ------------------------------------------------------------- cut --
    def lower_markers(self):
        Cutter(self.fn).lower_markers()

    def build_cfg(self):
        Cutter(self.fn).build_cfg()

    def order_syncs(self):
        Cutter(self.fn).order_syncs()

    # --------------------------------------------------------- analyse --
    def liveness(self):
        self.analysis.liveness()

    def classify(self):
        self.analysis.classify()

    def privatise(self):
        Privatisation(self.analysis).privatise()

    def uniform_candidates(self):
        uniform_candidates(self.analysis)
        affine_counters(self.analysis)
        affine_values(self.analysis)
        run_invariant(self.analysis)

    # ------------------------------------------------------------ emit --
    def emit(self) -> list[str]:
        """The step functions (and, for loop_text, their exits)."""
        steps = StepEmitter(self.analysis, self.ai_group)
        out = steps.emit()
        self.exits = steps.exits
        steps_text = step_functions(out, self.fn.sym)
        self.guards = {k: g for k, text in steps_text.items() if (g := prefix_guard(text)) is not None}
        # A kernel whose steps never read y has no use for rows: no jammed
        # loop (code that would only cost compile time).
        y = re.compile(re.escape(_ref(self.fn.y)) + r"\b")
        self.reads_y = any(len(y.findall("\n".join(text))) > 1 for text in steps_text.values())  # not only the parameter
        return out

    def emit_all(self) -> tuple[list[str], list[str]]:
        """The kernel's type definitions, and its functions and descriptor."""
        steps = self.emit()
        return self.types_text(), steps + self.loop_text() + self.descriptor_text()

    def types_text(self) -> list[str]:
        return types_text(self.fn, self.analysis)

    def loop_text(self) -> list[str]:
        return loop_text(self.fn, self.exits, self.loop_group, self.guards,
                         self.row_jam if self.reads_y else 1)

    def descriptor_text(self) -> list[str]:
        return descriptor_text(self.fn, self.analysis, self.guards)
