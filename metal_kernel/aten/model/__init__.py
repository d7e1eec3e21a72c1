"""What a PyTorch tree says, read but never written.

tree.py (where files live), native_functions.py (native_functions.yaml via torchgen,
with line spans), stubs.py (DispatchStubs), arity.py (unary/binary file and macro
table), dtypes.py (dtype tables), opinfo.py (OpInfo dtypes, samples, skips),
common_mps.py (test_mps's expected-failure lists, parsed), op_classes.py (coverage classes).
"""
