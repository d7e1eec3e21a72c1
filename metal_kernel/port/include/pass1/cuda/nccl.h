// metal-kernel: pass-1 stub (multi-GPU host code: load_cuda drops host code, so only the name must resolve)
