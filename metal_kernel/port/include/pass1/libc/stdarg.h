// metal-kernel: pass-1 stub (declarations come from mkcuda/prelude.h in pass 2)
