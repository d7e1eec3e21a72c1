"""The compile cache: content-keyed, shared by processes, self-healing."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import metal_kernel
from metal_kernel.runtime import compiler

SRC = "kernel void k(device float* x, uint i [[thread_position_in_grid]]) { x[i] = %s; }"


def _objects(cache: Path):
    return sorted(p.name for p in (cache / "objects").glob("*.so") if not p.name.startswith("mkrt"))


def test_same_source_hits_the_cache_without_the_preprocessor(tmp_path, monkeypatch):
    monkeypatch.setenv("METAL_KERNEL_CACHE_DIR", str(tmp_path))
    metal_kernel.compile_shader(SRC % "1.0")
    calls = []
    real = compiler.preprocess
    monkeypatch.setattr(compiler, "preprocess", lambda *a, **k: calls.append(1) or real(*a, **k))
    lib = metal_kernel.compile_shader(SRC % "1.0")
    assert calls == []
    x = torch.zeros(3)
    lib.k(x)
    assert x.tolist() == [1.0] * 3


def test_changed_include_invalidates_the_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("METAL_KERNEL_CACHE_DIR", str(tmp_path / "cache"))
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "v.h").write_text("#define VALUE 1.0\n")
    src = '#include "v.h"\n' + SRC % "VALUE"
    x = torch.zeros(2)
    metal_kernel.compile_shader(src, include_dirs=[str(inc)]).k(x)
    assert x.tolist() == [1.0, 1.0]
    (inc / "v.h").write_text("#define VALUE 2.0   \n")
    metal_kernel.compile_shader(src, include_dirs=[str(inc)]).k(x)
    assert x.tolist() == [2.0, 2.0]


def test_corrupt_entry_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("METAL_KERNEL_CACHE_DIR", str(tmp_path))
    metal_kernel.compile_shader(SRC % "3.0")
    for p in (tmp_path / "objects").glob("*.json"):
        p.write_text("{not json")
    for p in (tmp_path / "manifests").glob("*.json"):
        p.write_text("garbage")
    x = torch.zeros(2)
    metal_kernel.compile_shader(SRC % "3.0").k(x)
    assert x.tolist() == [3.0, 3.0]


def test_truncated_library_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("METAL_KERNEL_CACHE_DIR", str(tmp_path))
    metal_kernel.compile_shader(SRC % "4.0")
    for name in _objects(tmp_path):
        # A new file, as any writer of the cache makes (the loaded library's
        # pages belong to the old one and stay intact).
        path = tmp_path / "objects" / name
        path.unlink()
        path.write_bytes(b"\x7fELF broken")
    x = torch.zeros(2)
    metal_kernel.compile_shader(SRC % "4.0").k(x)
    assert x.tolist() == [4.0, 4.0]


def test_processes_compiling_the_same_source_at_once(tmp_path):
    script = textwrap.dedent(f"""
        import torch, metal_kernel
        lib = metal_kernel.compile_shader({(SRC % '5.0')!r})
        x = torch.zeros(4); lib.k(x); assert x.tolist() == [5.0] * 4
    """)
    env = dict(os.environ, METAL_KERNEL_CACHE_DIR=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env) for _ in range(4)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0, 0, 0]
    assert len(_objects(tmp_path)) == 1
    assert not [p for p in (tmp_path / "objects").iterdir() if p.name.startswith(".tmp")]


@pytest.mark.no_metal_check  # counts the cache's entries, which the checked build adds to
def test_options_are_part_of_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv("METAL_KERNEL_CACHE_DIR", str(tmp_path))
    src = SRC % "V"
    a, b = torch.zeros(1), torch.zeros(1)
    metal_kernel.compile_shader(src, defines={"V": 1}).k(a)
    metal_kernel.compile_shader(src, defines={"V": 2}).k(b)
    assert (a.item(), b.item()) == (1.0, 2.0)
    manifests = list((tmp_path / "manifests").glob("*.json"))
    assert len(manifests) == 2 and all(json.loads(m.read_text())["object"] for m in manifests)


def _pchs(cache: Path):
    return sorted((cache / "objects").glob("prelude-*.pch"))


def test_the_prelude_is_precompiled_once_and_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("METAL_KERNEL_CACHE_DIR", str(tmp_path))
    metal_kernel.compile_shader(SRC % "1.0")
    pchs = _pchs(tmp_path)
    assert len(pchs) == 1
    stamp = pchs[0].stat().st_mtime_ns
    lib = metal_kernel.compile_shader(SRC % "2.0")  # a new library, same flags
    assert _pchs(tmp_path) == pchs and pchs[0].stat().st_mtime_ns == stamp
    x = torch.zeros(3)
    lib.k(x)
    assert x.tolist() == [2.0] * 3


def test_a_touched_header_keeps_the_precompiled_prelude(tmp_path, monkeypatch):
    """A checkout or reinstall rewrites the runtime's headers with the same
    bytes and a new mtime; the PCH (keyed by their content) stays valid
    and in use (zig's cache may hand back a PCH built before the touch)."""
    monkeypatch.setenv("METAL_KERNEL_CACHE_DIR", str(tmp_path))
    metal_kernel.compile_shader(SRC % "1.0")
    pchs = _pchs(tmp_path)
    stamp = pchs[0].stat().st_mtime_ns
    header = compiler.pass2.PRELUDE
    st = header.stat()
    os.utime(header, ns=(st.st_atime_ns, st.st_mtime_ns + 10**11))
    try:
        lib = metal_kernel.compile_shader(SRC % "5.0")
    finally:
        os.utime(header, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _pchs(tmp_path) == pchs and pchs[0].stat().st_mtime_ns == stamp
    x = torch.zeros(3)
    lib.k(x)
    assert x.tolist() == [5.0] * 3


def test_a_corrupt_precompiled_prelude_is_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv("METAL_KERNEL_CACHE_DIR", str(tmp_path))
    metal_kernel.compile_shader(SRC % "1.0")
    (pch,) = _pchs(tmp_path)
    pch.write_bytes(b"not a precompiled header")
    lib = metal_kernel.compile_shader(SRC % "3.0")  # falls back to the header
    x = torch.zeros(3)
    lib.k(x)
    assert x.tolist() == [3.0] * 3
    metal_kernel.compile_shader(SRC % "4.0")  # and the next compile rebuilds it
    assert pch.read_bytes()[:4] == b"CPCH"


def test_user_errors_are_not_mistaken_for_a_bad_precompiled_prelude(tmp_path, monkeypatch):
    monkeypatch.setenv("METAL_KERNEL_CACHE_DIR", str(tmp_path))
    metal_kernel.compile_shader(SRC % "1.0")
    (pch,) = _pchs(tmp_path)
    with pytest.raises(SyntaxError, match="undeclared_name"):
        metal_kernel.compile_shader(SRC % "undeclared_name")
    assert pch.exists()
