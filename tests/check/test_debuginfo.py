"""Sites are the user's lines wherever the checkout lives: clang writes a
header below the compile's directory relative to it (a checkout under /tmp,
built in /tmp/...), and such a runtime header is still the runtime's."""

from metal_kernel.check.debuginfo import DebugInfo

META = [
    '!1 = !DIFile(filename: "buggy.metal", directory: "/tmp/mk-build-1")',
    '!2 = !DIFile(filename: "fresh/metal_kernel/runtime/include/mk/runtime.h", directory: "/tmp")',
    '!3 = distinct !DISubprogram(name: "kern", scope: !1, file: !1, line: 70)',
    '!4 = distinct !DISubprogram(name: "barrier", scope: !2, file: !2, line: 220)',
    '!5 = !DILocation(line: 74, column: 3, scope: !3)',
    '!6 = !DILocation(line: 223, column: 5, scope: !4, inlinedAt: !5)',
]


def test_a_runtime_header_named_relative_to_the_compile_directory_is_not_the_users():
    debug = DebugInfo(META, ("/tmp/fresh/metal_kernel/runtime/include",))
    assert debug.site("!6") == ("buggy.metal", 74, 3, "kern")


def test_the_users_file_is_kept_as_it_is_named():
    debug = DebugInfo(META, ("/elsewhere/metal_kernel/runtime/include",))
    assert debug.site("!6")[0] == "fresh/metal_kernel/runtime/include/mk/runtime.h"  # not a runtime dir here
    assert debug.site("!5") == ("buggy.metal", 74, 3, "kern")
