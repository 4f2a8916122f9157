/* basic.c — the smallest kern program: create a context, convert a buffer,
 * report the CPU. Built twice: against include/ + kernels/, and against
 * dist/kern.h alone (the vendoring check, KERN_EXAMPLE_SINGLE_FILE). */
#define KERN_IMPLEMENTATION
#include "kern.h"

#include <stdio.h>

int main(void) {
    kern_ctx *ctx = NULL;
    kern_ctx_params p = {0};
    float x[5] = {1.0f, -2.5f, 3.14159f, 65504.0f, 1e-8f}, back[5];
    uint16_t h[5];
    char feat[256];
    int i;
    p.n_threads = 2;
    if (kern_ctx_create(&p, &ctx) != KERN_OK) {
        fprintf(stderr, "kern_ctx_create: %s\n", kern_last_error());
        return 1;
    }
    if (kern_convert(ctx, KERN_F32, x, KERN_BF16, h, 5) != KERN_OK ||
        kern_convert(ctx, KERN_BF16, h, KERN_F32, back, 5) != KERN_OK) {
        fprintf(stderr, "kern_convert: %s\n", kern_last_error());
        return 1;
    }
    for (i = 0; i < 5; i++)
        if (back[i] != kern_bf16_to_f32(kern_f32_to_bf16(x[i]))) return 1;
    printf("kern %d.%d.%d, %d threads, isa %s, tuning class %s, cpu: %s (%s)\n",
           KERN_VERSION_MAJOR, KERN_VERSION_MINOR, KERN_VERSION_PATCH, kern_ctx_threads(ctx),
           kern_isa_name(kern_ctx_isa(ctx)), kern_uarch_name(kern_ctx_uarch(ctx)),
           kern_cpu_info()->brand[0] ? kern_cpu_info()->brand : "unknown",
           kern_cpu_features_str(kern_cpu_features(), feat, sizeof feat));
    /* a vendoring-check binary run by `make test` reports like a test */
    printf("[basic.c] 1 ok, 0 failed\n");
    kern_ctx_destroy(ctx);
    return 0;
}
