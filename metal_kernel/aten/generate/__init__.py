"""The text `aten add` writes: functors and REGISTER_* lines (functor.py), host code (host.py)."""
