"""What of `MPSStream` a custom host function uses: the kernel error buffer.

Kernels report errors with `TORCH_REPORT_ERROR(error_buf, ...)` (c10/metal/error.h) into
`stream->getErrorBuffer()`, a `c10::metal::ErrorMessages`; `MPSStream::checkLastError()`
(run at the next synchronize) swaps its count to zero and, when it was non-zero, throws
`c10::AcceleratorError` with `msg[0].message` — `torch.AcceleratorError` in Python.

The buffer layout is read from the checkout's own error.h, so the twin binds the bytes
the kernels were compiled against. The twin checks the buffer right after each
dispatch (what a `torch.mps.synchronize()` after the op does on a Mac).
"""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

import torch

from ..errors import AtenError

_C_TYPES = {"char": ctypes.c_char, "unsigned int": ctypes.c_uint, "uint": ctypes.c_uint,
            "int": ctypes.c_int}
_COUNT = re.compile(r"error_message_count\s*=\s*(\d+)")
_MESSAGE = re.compile(r"struct\s+ErrorMessage\s*\{(?P<body>.*?)\};", re.S)
_FIELD = re.compile(r"(?P<type>unsigned int|uint|int|char)\s+(?P<name>\w+)\s*(?:\[(?P<n>\d+)\])?\s*;")


def error_messages_layout(error_h: Path) -> type[ctypes.Structure]:
    """ctypes twin of `c10::metal::ErrorMessages` as declared in `error_h`."""
    text = Path(error_h).read_text() if Path(error_h).is_file() else ""
    count, body = _COUNT.search(text), _MESSAGE.search(text)
    fields = [(m["name"], _C_TYPES[m["type"]] * int(m["n"]) if m["n"] else _C_TYPES[m["type"]])
              for m in _FIELD.finditer(body["body"])] if body else []
    if count is None or not fields:
        raise AtenError("cannot read the ErrorMessages layout (error_message_count, struct ErrorMessage)",
                        error_h)
    message = type("ErrorMessage", (ctypes.Structure,), {"_fields_": fields})
    return type("ErrorMessages", (ctypes.Structure,),
                {"_fields_": [("count", ctypes.c_uint), ("msg", message * int(count[1]))]})


class MpsStream:
    def __init__(self, layout: type[ctypes.Structure]):
        self.layout = layout
        self.error_buffer = torch.zeros(ctypes.sizeof(layout), dtype=torch.uint8)  # getErrorBuffer()

    def messages(self) -> ctypes.Structure:
        return self.layout.from_buffer(self.error_buffer.numpy())

    def check_last_error(self) -> None:
        msgs = self.messages()
        count, msgs.count = msgs.count, 0
        if count:
            raise torch.AcceleratorError(msgs.msg[0].message.decode(errors="replace"))
