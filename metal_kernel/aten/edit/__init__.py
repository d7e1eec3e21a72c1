"""Planned, atomic edits of a PyTorch tree; nothing is written before every edit is planned.

fileops.py (FileChange, diffs, atomic writes), dispatch.py (native_functions.yaml rows),
metal.py (functor and REGISTER_* lines in kernels/*.metal), kernel_file.py (a recipe's
kernels/<Stem>.metal), mm.py (host code in operations/*.mm), testlist.py (common_mps.py).
"""
