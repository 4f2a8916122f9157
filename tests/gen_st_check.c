/* gen_st_check.c -- kern_gen.py model --safetensors: the weights read at
 * their offsets in the safetensors file (tests/gen/write_st.py wrote
 * build/gen/bert1.safetensors in reverse graph order) give the same bits as
 * NAME_prepare with the same weights passed one by one; a short file, a
 * changed header, a misaligned or NULL file are refused. */
#include "kern.h"
#include "kt.h"
#define BERT1_ST_IMPLEMENTATION
#include "bert1_st.h"

#include <stdio.h>

static unsigned char *st_read(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    unsigned char *p = NULL;
    long n;
    *size = 0;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
        p = (unsigned char *)kt_alloc((size_t)n + 8, "file");
        if (fread(p, 1, (size_t)n, f) == (size_t)n) *size = (size_t)n;
    }
    fclose(f);
    return p;
}

KT_TEST(gen_safetensors_weights) {
    kern_ctx *ctx = kt_ctx(1, KERN_ISA_AUTO);
    size_t size = 0;
    unsigned char *file = st_read("build/gen/bert1.safetensors", &size);
    void *wdata[BERT1_ST_N_WEIGHTS + 1], *idata[BERT1_ST_N_INPUTS + 1];
    void *y0[BERT1_ST_N_OUTPUTS + 1], *y1[BERT1_ST_N_OUTPUTS + 1];
    size_t ybytes[BERT1_ST_N_OUTPUTS + 1];
    void *arena;
    bert1_st_model m0, m1;
    kt_rng r = kt_rng_make(11);
    int i, d;
    KT_REQUIRE(file && size, "cannot read build/gen/bert1.safetensors");
    for (i = 0; i < BERT1_ST_N_WEIGHTS; i++) {
        int64_t n = 1, j;
        float *w;
        for (d = 0; d < bert1_st_weight_ndim[i]; d++) n *= bert1_st_weight_shapes[i][d];
        w = (float *)kt_alloc((size_t)n * 4 + 4, "w");
        for (j = 0; j < n; j++) w[j] = (float)((7 * j + 13 * i) % 23 - 11) / 64.0f;
        wdata[i] = w;
    }
    for (i = 0; i < BERT1_ST_N_INPUTS; i++) {
        int64_t n = 1, j;
        kern_dtype dt = bert1_st_input_dtypes[i];
        for (d = 0; d < bert1_st_input_ndim[i]; d++) n *= bert1_st_input_shapes[i][d];
        idata[i] = kt_alloc((size_t)n * kern_dtype_size(dt) + 8, "in");
        for (j = 0; j < n; j++)
            kt_set(idata[i], dt, j, kern_dtype_is_float(dt) ? (strstr(bert1_st_input_names[i], "mask") ? 0.0 : kt_uniform(&r, -1, 1))
                                                            : (double)(j % 2));
    }
    for (i = 0; i < BERT1_ST_N_OUTPUTS; i++) {
        int64_t n = 1;
        for (d = 0; d < bert1_st_output_ndim[i]; d++) n *= bert1_st_output_shapes[i][d];
        ybytes[i] = (size_t)n * kern_dtype_size(bert1_st_output_dtypes[i]);
        y0[i] = kt_alloc(ybytes[i] + 8, "y0");
        y1[i] = kt_alloc(ybytes[i] + 8, "y1");
    }
    KT_OK(bert1_st_prepare(ctx, (const void *const *)wdata, &m0));
    KT_OK(bert1_st_prepare_safetensors(ctx, file, size, &m1));
    KT_CHECK(bert1_st_arena_bytes(&m0) == bert1_st_arena_bytes(&m1), "arena bytes differ");
    arena = kt_alloc(bert1_st_arena_bytes(&m0) + 64, "arena");
    KT_OK(bert1_st_run(ctx, &m0, (const void *const *)idata, y0, arena));
    KT_OK(bert1_st_run(ctx, &m1, (const void *const *)idata, y1, arena));
    for (i = 0; i < BERT1_ST_N_OUTPUTS; i++)
        KT_CHECK(memcmp(y0[i], y1[i], ybytes[i]) == 0, "output %s differs", bert1_st_output_names[i]);
    bert1_st_release(ctx, &m1);
    /* refusals: nothing prepared, m zeroed */
    KT_ERROR(bert1_st_prepare_safetensors(ctx, NULL, size, &m1), KERN_ERR_ARG, "NULL");
    KT_ERROR(bert1_st_prepare_safetensors(ctx, file, BERT1_ST_SAFETENSORS_MIN_SIZE - 1, &m1), KERN_ERR_ARG,
             "bytes");
    memmove(file + 1, file, size);
    KT_ERROR(bert1_st_prepare_safetensors(ctx, file + 1, size, &m1), KERN_ERR_ARG, "aligned");
    memmove(file, file + 1, size);
    file[9] ^= 1; /* inside the JSON header */
    KT_ERROR(bert1_st_prepare_safetensors(ctx, file, size, &m1), KERN_ERR_ARG, "header differs");
    file[9] ^= 1;
    file[0] ^= 8; /* the header's length */
    KT_ERROR(bert1_st_prepare_safetensors(ctx, file, size, &m1), KERN_ERR_ARG, "header of");
    bert1_st_release(ctx, &m0);
    for (i = 0; i < BERT1_ST_N_WEIGHTS; i++) kt_free(wdata[i]);
    for (i = 0; i < BERT1_ST_N_INPUTS; i++) kt_free(idata[i]);
    for (i = 0; i < BERT1_ST_N_OUTPUTS; i++) {
        kt_free(y0[i]);
        kt_free(y1[i]);
    }
    kt_free(arena);
    kt_free(file);
}

KT_MAIN()
