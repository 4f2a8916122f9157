/* libFuzzer harness for the safetensors reader and writer.
 *
 * Contract checked on every input (parsed both borrowed and copied):
 *   - the status is a kern_status; an error leaves *out untouched, sets a
 *     message and frees everything it allocated;
 *   - an accepted file's entries lie inside the buffer (first and last
 *     byte read: ASan sees any overrun), sum to the data section, and the
 *     tensors kern has dtypes for serialize and parse back to the same
 *     names, dtypes, shapes and bytes.
 * Build: make fuzz FUZZERS=safetensors. -DKF_REPLAY (the corpus replay of
 * make test) or -DKERN_FUZZ_MAIN gives a file-running main. */
#ifndef KT_LINKED /* mk/linked.mk links the implementation compiled once */
#define KERN_IMPLEMENTATION
#endif
#include "kern_safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz.h"

static void fz_check_file(kern_safetensors *st) {
    int64_t i, n = kern_safetensors_count(st), k = 0;
    kern_safetensors_item *items = (kern_safetensors_item *)calloc((size_t)n + 1, sizeof *items);
    kern_tensor *ts = (kern_tensor *)calloc((size_t)n + 1, sizeof *ts);
    for (i = 0; i < n; i++) {
        kern_safetensors_entry e;
        FZ_CHECK(kern_safetensors_entry_at(st, i, &e) == KERN_OK);
        if (e.nbytes) {
            volatile unsigned char a = ((const unsigned char *)e.data)[0];
            volatile unsigned char b = ((const unsigned char *)e.data)[e.nbytes - 1];
            (void)a;
            (void)b;
        }
        if (e.dtype != KERN_DTYPE_NONE && e.nbytes <= (1u << 20) &&
            kern_safetensors_tensor(st, e.name, &ts[k]) == KERN_OK) {
            items[k].name = e.name;
            items[k].tensor = &ts[k];
            k++;
        }
    }
    {
        size_t sz;
        if (kern_safetensors_serialized_size(fz_ctx(), items, k, NULL, &sz) == KERN_OK) {
            unsigned char *buf = (unsigned char *)malloc(sz);
            kern_safetensors *back = NULL;
            FZ_CHECK(kern_safetensors_serialize(fz_ctx(), items, k, NULL, buf, sz) == KERN_OK);
            FZ_CHECK(kern_safetensors_from_memory(fz_ctx(), buf, sz, NULL, &back) == KERN_OK);
            FZ_CHECK(kern_safetensors_count(back) == k);
            for (i = 0; i < k; i++) {
                kern_safetensors_entry e;
                FZ_CHECK(kern_safetensors_find(back, items[i].name, &e) == KERN_OK);
                FZ_CHECK(e.dtype == ts[i].dtype && e.ndim == ts[i].ndim);
                FZ_CHECK(memcmp(e.data, ts[i].data, (size_t)e.nbytes) == 0);
            }
            kern_safetensors_free(fz_ctx(), back);
            free(buf);
        } else {
            FZ_CHECK(kern_last_error()[0] != 0);
        }
    }
    free(items);
    free(ts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int mode;
    for (mode = 0; mode < 2; mode++) {
        kern_safetensors *st = (kern_safetensors *)(uintptr_t)0x10;
        kern_safetensors_params p;
        long before = live;
        kern_status s;
        memset(&p, 0, sizeof p);
        p.borrow = mode;
        kern_clear_error();
        s = kern_safetensors_from_memory(fz_ctx(), data, size, &p, &st);
        FZ_CHECK(s >= 0 && s < KERN_STATUS_COUNT);
        if (s != KERN_OK) {
            FZ_CHECK(st == (kern_safetensors *)(uintptr_t)0x10);
            FZ_CHECK(kern_last_error()[0] != 0);
            FZ_CHECK(live == before);
            return 0; /* the other mode fails the same way */
        }
        fz_check_file(st);
        kern_safetensors_free(fz_ctx(), st);
        FZ_CHECK(live == before);
    }
    return 0;
}

#if defined(KF_REPLAY) || defined(KERN_FUZZ_MAIN)
#include "fz_replay.h"
#endif
