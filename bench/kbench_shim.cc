// kbench_shim.cc — the only C++ in kern's benchmarks: adapts Google
// Benchmark to the C API in kbench.h and provides main().
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "kbench.h"

struct kbench_state {
    benchmark::State *st;
    double flops, bytes;
    int threads;
};

namespace {
const char *peak_label(kbench_peak p) {
    switch (p) {
    case KBENCH_PEAK_F32: return "peak=f32";
    case KBENCH_PEAK_BF16: return "peak=bf16";
    case KBENCH_PEAK_INT8: return "peak=int8";
    case KBENCH_PEAK_AMX_BF16: return "peak=amx_bf16";
    case KBENCH_PEAK_DRAM: return "peak=dram";
    case KBENCH_PEAK_L2: return "peak=l2";
    case KBENCH_PEAK_L1: return "peak=l1";
    case KBENCH_PEAK_LATENCY: return "peak=latency";
    default: return "peak=none";
    }
}
std::vector<void *> &allocations() {
    static std::vector<void *> v;
    return v;
}
std::map<int, kern_ctx *> &contexts() {
    static std::map<int, kern_ctx *> m;
    return m;
}
kern_isa &forced_isa() {
    static kern_isa isa = KERN_ISA_AUTO;
    return isa;
}

kern_uarch &forced_uarch() {
    static kern_uarch u = KERN_UARCH_AUTO;
    return u;
}
std::vector<std::string> &headlines() {
    static std::vector<std::string> v;
    return v;
}
}  // namespace

extern "C" {

void kbench_add(const char *family, const char *case_name, const char *impl,
                int threads, kbench_peak peak, kbench_fn fn, void *user) {
    std::string name = std::string(family) + "/" + impl + "/t" +
                       std::to_string(threads) + "/" + case_name;
    std::string label = peak_label(peak);
    benchmark::RegisterBenchmark(
        name.c_str(),
        [fn, user, threads, label](benchmark::State &st) {
            kbench_state ks;
            ks.st = &st;
            ks.flops = 0;
            ks.bytes = 0;
            ks.threads = threads;
            fn(&ks, user);
            if (st.error_occurred()) return;
            if (ks.flops > 0) st.counters["flop"] = ks.flops;
            if (ks.bytes > 0) st.counters["byte"] = ks.bytes;
            st.SetLabel(label);
        })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
}

void kbench_headline(const char *family, const char *case_name) {
    headlines().push_back(std::string(family) + "/" + case_name);
}

int kbench_next(kbench_state *s) { return s->st->KeepRunning() ? 1 : 0; }

void kbench_pause(kbench_state *s) { s->st->PauseTiming(); }
void kbench_resume(kbench_state *s) { s->st->ResumeTiming(); }
void kbench_set_flops(kbench_state *s, double f) { s->flops = f; }
void kbench_set_bytes(kbench_state *s, double b) { s->bytes = b; }
void kbench_counter(kbench_state *s, const char *name, double v) {
    s->st->counters[name] = v;
}
void kbench_skip(kbench_state *s, const char *why) {
    s->st->SkipWithError((std::string("skipped: ") + why).c_str());
}
int kbench_threads(const kbench_state *s) { return s->threads; }

kern_ctx *kbench_ctx(int threads) {
    auto &m = contexts();
    auto it = m.find(threads);
    if (it != m.end()) return it->second;
    kern_ctx_params p;
    std::memset(&p, 0, sizeof p);
    p.n_threads = threads;
    p.uarch = forced_uarch();
    p.isa_cap = forced_isa();
    kern_ctx *c = nullptr;
    if (kern_ctx_create(&p, &c) != KERN_OK) return nullptr;
    m[threads] = c;
    return c;
}

void *kbench_alloc(size_t bytes) {
    void *p = nullptr;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) return nullptr;
    allocations().push_back(p);
    return p;
}

void *kbench_aligned(size_t bytes) {
    void *p = nullptr;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) return nullptr;
    return p;
}

void *kbench_grow(void **p, size_t *cap, size_t bytes, kern_dtype fill, uint64_t seed) {
    if (*cap >= bytes && *p) return *p;
    free(*p);
    *p = kbench_aligned(bytes);
    *cap = *p ? bytes : 0;
    if (*p && fill != KERN_DTYPE_NONE)
        kbench_fill(*p, fill, (int64_t)(bytes / kern_dtype_size(fill)), seed);
    else if (*p)
        memset(*p, 0, bytes);
    return *p;
}

void kbench_fill(void *p, kern_dtype dt, int64_t n, uint64_t seed) {
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        double u = (double)(s >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0;
        if (u == 0) u = 0.5;
        switch (dt) {
        case KERN_F32: ((float *)p)[i] = (float)u; break;
        case KERN_F16: ((uint16_t *)p)[i] = kern_f32_to_f16((float)u); break;
        case KERN_BF16: ((uint16_t *)p)[i] = kern_f32_to_bf16((float)u); break;
        case KERN_I8: ((int8_t *)p)[i] = (int8_t)((s >> 24) % 255 - 127) | 1; break;
        case KERN_U8: case KERN_BOOL: ((uint8_t *)p)[i] = (uint8_t)((s >> 24) | 1); break;
        case KERN_I32: ((int32_t *)p)[i] = (int32_t)(s >> 40) | 1; break;
        case KERN_I64: ((int64_t *)p)[i] = (int64_t)(s >> 24) | 1; break;
        default: break;
        }
    }
}

void kbench_use(const void *p) { benchmark::DoNotOptimize(p); }

}  // extern "C"

int main(int argc, char **argv) {
    // --kbench_headline: the headline cases (bench/run's default set).
    for (int i = 1; i < argc; i++) {
        if (std::strcmp(argv[i], "--kbench_headline") == 0) {
            for (const std::string &h : headlines()) std::printf("%s\n", h.c_str());
            return 0;
        }
    }
    // --kbench_uarch=NAME: run under that tuning class (kern_uarch_name);
    // the default is the detected one. Same binary, other table: an A/B of
    // two classes' blocking in one sitting.
    for (int i = 1; i < argc; i++) {
        if (std::strncmp(argv[i], "--kbench_uarch=", 15) == 0) {
            kern_uarch u = kern_uarch_from_name(argv[i] + 15);
            if (u == KERN_UARCH_COUNT) {
                std::fprintf(stderr, "unknown tuning class %s\n", argv[i] + 15);
                return 2;
            }
            forced_uarch() = u;
            for (int k = i; k + 1 < argc; k++) argv[k] = argv[k + 1];
            argc--;
            i--;
        }
    }
    // --kbench_isa=NAME: contexts capped at that level (kern_isa_name), so
    // one binary times two levels' kernels (e.g. amx against avx512_bf16).
    for (int i = 1; i < argc; i++) {
        if (std::strncmp(argv[i], "--kbench_isa=", 13) == 0) {
            kern_isa all[KERN_ISA_COUNT];
            int n = kern_isa_list(all, KERN_ISA_COUNT, 1), k, found = 0;
            for (k = 0; k < n && !found; k++)
                if (std::strcmp(argv[i] + 13, kern_isa_name(all[k])) == 0) {
                    forced_isa() = all[k];
                    found = 1;
                }
            if (!found) {
                std::fprintf(stderr, "%s: not a level this machine runs\n", argv[i] + 13);
                return 2;
            }
            for (k = i; k + 1 < argc; k++) argv[k] = argv[k + 1];
            argc--;
            i--;
        }
    }
    {
        const kern_cpu_info_t *ci = kern_cpu_info();
        char buf[64];
        benchmark::AddCustomContext(
            "kern_isa", kern_isa_name(forced_isa() == KERN_ISA_AUTO ? kern_isa_best() : forced_isa()));
        kern_uarch u = forced_uarch() == KERN_UARCH_AUTO ? ci->uarch : forced_uarch();
        benchmark::AddCustomContext("kern_cpu", ci->brand[0] ? ci->brand : "unknown");
        std::snprintf(buf, sizeof buf, "%s family 0x%x model 0x%x", ci->vendor, ci->family,
                      ci->model);
        benchmark::AddCustomContext("kern_cpu_id", buf);
        benchmark::AddCustomContext("kern_uarch", kern_uarch_name(u));
        std::snprintf(buf, sizeof buf, "%.2f", ci->zmm_ymm_ratio);
        benchmark::AddCustomContext("kern_zmm_ymm_ratio", buf);
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    for (void *p : allocations()) std::free(p);
    for (auto &kv : contexts()) kern_ctx_destroy(kv.second);
    return 0;
}
