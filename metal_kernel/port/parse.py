"""Stage 1: the preprocessed CUDA text as a tree-sitter-cuda syntax tree.

The text is what clang -E made of the user's file (macros expanded, CUDA
headers reduced to stubs). Its `# N "file"` line markers are blanked for
the parser (same length, so byte offsets stay valid) and kept for mapping
offsets back to the user's files and lines.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from ..runtime.lexer import LineMap

_MARKER_LINE = re.compile(rb"^#[^\n]*", re.MULTILINE)


@functools.lru_cache(maxsize=1)
def _parser():
    try:
        import tree_sitter
        import tree_sitter_cuda
    except ImportError as e:  # pragma: no cover - a broken install
        raise ImportError(
            "metal_kernel.port needs the tree-sitter CUDA parser: pip install tree-sitter tree-sitter-cuda"
        ) from e
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_cuda.language()))


@dataclass
class Source:
    """Preprocessed text (bytes: tree-sitter offsets are byte offsets), its
    syntax tree and the map back to the user's lines."""
    data: bytes
    tree: object
    lines: LineMap

    @property
    def root(self):
        return self.tree.root_node

    def text(self, node) -> str:
        return self.data[node.start_byte:node.end_byte].decode("utf-8", errors="replace")

    def where(self, node_or_offset) -> tuple[str, int]:
        offset = node_or_offset if isinstance(node_or_offset, int) else node_or_offset.start_byte
        return self.lines.locate(offset)


def parse(text: str) -> Source:
    data = text.encode("utf-8")
    blanked = _MARKER_LINE.sub(lambda m: b" " * len(m.group(0)), data)
    tree = _parser().parse(blanked)
    # latin-1 maps each byte to one character: LineMap's offsets are bytes.
    return Source(data, tree, LineMap(data.decode("latin-1")))


# ----------------------------------------------------------- tree helpers --
def keywords(node) -> set[str]:
    """The anonymous keyword children of `node` (`__global__`, `template`, ...)
    and those inside its type qualifiers and storage classes."""
    out = set()
    for c in node.children:
        if not c.is_named:
            out.add(c.type)
        elif c.type in ("type_qualifier", "storage_class_specifier", "virtual_function_specifier"):
            out.update(cc.type for cc in c.children)
    return out


def walk(node):
    """Every node below `node`, depth first, in source order."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def file_scope(root):
    """The top-level items under `root`, looking through namespaces and
    `extern "C"` blocks (a block's items after those of the level around it)."""
    todo = [root]
    while todo:
        node = todo.pop()
        for n in node.children:
            if n.type in ("namespace_definition", "linkage_specification"):
                body = n.child_by_field_name("body")
                if body is not None:
                    todo.append(body)
            else:
                yield n


def is_function_declarator(d) -> bool:
    """Whether declarator `d` declares a function (not a variable of
    function-pointer or array type)."""
    while d is not None:
        if d.type == "function_declarator":
            return True
        if d.type in ("init_declarator", "array_declarator"):
            return False
        d = d.child_by_field_name("declarator")
    return False


def declarator_name(node):
    """The identifier a (possibly nested) declarator declares, or None."""
    while node is not None:
        if node.type in ("identifier", "field_identifier", "type_identifier", "operator_name",
                         "destructor_name", "qualified_identifier", "template_function"):
            return node
        node = node.child_by_field_name("declarator")
    return None
