/* fz.h — the base of the whole-input fuzzers (fuzz_ir.c,
 * fuzz_safetensors.c), which check a reader's contract on one buffer
 * rather than drawing a kernel call from it (those use kf.h): a counting
 * allocator (every allocation of the one context must be freed by the end
 * of an input), the contract assertion, and the shared one-thread context.
 * Include after kern's header. */
#ifndef KERN_FZ_H
#define KERN_FZ_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long live;
/* Requests above 256 MiB fail (NULL), as a real allocator's would for
 * sizes the input made up: the reader or planner must answer
 * KERN_ERR_NOMEM (ASan would abort on the request instead). */
#define FZ_ALLOC_CAP ((size_t)256 << 20)
static void *fz_alloc(void *u, size_t n, size_t a) {
    void *p = NULL;
    (void)u;
    if (n > FZ_ALLOC_CAP) return NULL;
    if (posix_memalign(&p, a, n ? n : 1)) return NULL;
    live++;
    return p;
}
static void fz_free(void *u, void *p) {
    (void)u;
    if (p) live--;
    free(p);
}

#define FZ_CHECK(c)                                                           \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "contract broken: %s (%s:%d) last error: %s\n", #c, __FILE__, \
                    __LINE__, kern_last_error());                             \
            abort();                                                          \
        }                                                                     \
    } while (0)

static kern_ctx *fz_ctx(void) {
    static kern_ctx *c;
    if (!c) {
        kern_ctx_params p;
        memset(&p, 0, sizeof p);
        p.n_threads = 1;
        p.allocator.alloc = fz_alloc;
        p.allocator.free = fz_free;
        if (kern_ctx_create(&p, &c)) abort();
    }
    return c;
}

#endif /* KERN_FZ_H */
