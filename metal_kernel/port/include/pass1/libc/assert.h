// Device assert: the dispatch stops with a KernelError naming the thread.
#undef assert
#ifdef NDEBUG
#define assert(e) ((void)0)
#elif defined(MKCUDA_HOST_PROGRAM)
#define assert(e) ((e) ? (void)0 : __mk_cuda_assert_fail_host(#e, __FILE__, __LINE__))
#else
#define assert(e) ((e) ? (void)0 : __mk_cuda_assert_fail(#e, __FILE__, __LINE__, __PRETTY_FUNCTION__))
#endif
