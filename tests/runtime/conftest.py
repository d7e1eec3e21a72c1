"""Fixtures for test modules that run one SOURCE both ways: work-item loops
(the default for synchronising kernels) and fibers."""

import pytest

import metal_kernel


@pytest.fixture(scope="module")
def fiber_lib(request):
    """The module's SOURCE compiled with METAL_KERNEL_WORKITEM_LOOPS=0."""
    mp = pytest.MonkeyPatch()
    mp.setenv("METAL_KERNEL_WORKITEM_LOOPS", "0")
    try:
        return metal_kernel.compile_shader(request.module.SOURCE)
    finally:
        mp.undo()


@pytest.fixture(params=["workitem", "fibers"])
def both(request, lib, fiber_lib):
    """The module's `lib`, then the same source on fibers."""
    return lib if request.param == "workitem" else fiber_lib


@pytest.fixture(scope="module")
def compile_with_ir():
    """compile(source) -> (library, the work-item transformed IR it was
    linked from, each unit's text joined). Give it a source no cache holds
    (a token in the code: the cache keys the preprocessed text, which has no
    comments), so that it is compiled here."""
    from metal_kernel.runtime import pass2

    def compile(source):
        seen = []
        link = pass2._link_cut

        def capture(ctx, result, kernels, out, uniform=None):
            seen.append(result.text)
            return link(ctx, result, kernels, out, uniform)

        mp = pytest.MonkeyPatch()
        mp.setattr(pass2, "_link_cut", capture)
        try:
            lib = metal_kernel.compile_shader(source)
        finally:
            mp.undo()
        return lib, "\n".join(seen)

    return compile


@pytest.fixture(scope="module")
def compile_with_flags(tmp_path_factory):
    """compile(source) -> (library, [(type, flags)] of the staged values
    in its descriptors: Uniform's size type and its `affine` field,
    mk/workitem.h), compiled into a new cache directory."""
    import re

    from metal_kernel.runtime import workitem

    def compile(source):
        flags = []
        original = workitem.transform

        def spy(text, syms, **kw):
            result = original(text, syms, **kw)
            flags.extend((t, int(f)) for t, f in re.findall(
                r"getelementptr \(([\w.]+), ptr null, i32 1\) to i64\), i64 (\d+) \}", result.text))
            return result

        mp = pytest.MonkeyPatch()
        try:
            mp.setattr(workitem, "transform", spy)
            mp.setenv("METAL_KERNEL_CACHE_DIR", str(tmp_path_factory.mktemp("flags")))
            lib = metal_kernel.compile_shader(source)
            name = re.search(r"kernel void (\w+)", source).group(1)
            assert getattr(lib, name) is not None  # built now, with the spy in place
        finally:
            mp.undo()
        return lib, flags

    return compile


@pytest.fixture
def build_for_avx2(monkeypatch):
    """build_for_avx2(): the compiles that follow target x86-64-v3 (AVX2,
    16 vector registers: the headers' 16-register paths); skips the test
    where the CPU cannot run that code."""
    def build():
        from metal_kernel.runtime.toolchain import find_toolchain

        try:
            with open("/proc/cpuinfo") as f:
                has_avx2 = " avx2" in f.read()
        except OSError:
            has_avx2 = False
        if not has_avx2:
            pytest.skip("needs a CPU with AVX2")
        march = "x86_64_v3" if find_toolchain().is_zig else "x86-64-v3"
        monkeypatch.setenv("METAL_KERNEL_CXXFLAGS", f"-march={march}")

    return build
