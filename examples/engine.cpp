// engine.cpp — kern from C++17: value-initialised params ({}), read-only
// weights wrapped without casts, the context owned by a unique_ptr.
//
// In C++ write `kern_gemm_params p{};` (every member zero = the defaults).
// `= {0}` is C only: in C++ it is an error where the first member is an enum
// (kern_norm_params) and a -Wmissing-field-initializers warning elsewhere.
#include <kern/kern.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

namespace {

struct ctx_deleter {
    void operator()(kern_ctx *c) const { kern_ctx_destroy(c); }
};
using ctx_ptr = std::unique_ptr<kern_ctx, ctx_deleter>;

bool ok(kern_status s, const char *what) {
    if (s != KERN_OK) std::fprintf(stderr, "%s: %s\n", what, kern_last_error());
    return s == KERN_OK;
}

} // namespace

int main() {
    constexpr int64_t T = 8, K = 32, N = 24;
    kern_ctx_params cp{};
    cp.n_threads = 2;
    kern_ctx *raw = nullptr;
    if (!ok(kern_ctx_create(&cp, &raw), "kern_ctx_create")) return 1;
    ctx_ptr ctx(raw);

    std::vector<float> xs(T * K), ws(N * K), y(T * N), z(T * N);
    for (int64_t i = 0; i < T * K; i++) xs[i] = float(i % 7) / 7.0f - 0.4f;
    for (int64_t i = 0; i < N * K; i++) ws[i] = float(i % 5) / 10.0f - 0.2f;
    const std::vector<float> &x = xs, &w = ws; // read-only, as an engine holds weights

    const kern_tensor tx = kern_tensor_2d(x.data(), KERN_F32, T, K); // const float *: no cast
    const kern_tensor tw = kern_tensor_2d(w.data(), KERN_F32, N, K);
    const kern_tensor ty = kern_tensor_2d(y.data(), KERN_F32, T, N);
    const kern_tensor tz = kern_tensor_2d(z.data(), KERN_F32, T, N);

    kern_gemm_params gp{};
    gp.trans_b = 1;
    gp.epilogue.act = KERN_ACT_GELU;
    if (!ok(kern_gemm(ctx.get(), &tx, &tw, &ty, &gp), "kern_gemm")) return 1;

    kern_norm_params np{}; // LayerNorm, eps 1e-5 (its first member is an enum)
    np.norm = KERN_NORM_RMS;
    if (!ok(kern_norm(ctx.get(), &ty, &tz, &np), "kern_norm")) return 1;

    // check one row against plain C++
    double maxerr = 0;
    for (int64_t i = 0; i < T; i++) {
        std::vector<double> row(N);
        double ms = 0;
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++) acc += double(x[i * K + k]) * w[j * K + k];
            row[j] = 0.5 * acc * (1.0 + std::erf(acc / std::sqrt(2.0)));
            ms += row[j] * row[j];
        }
        const double r = 1.0 / std::sqrt(ms / N + 1e-5);
        for (int64_t j = 0; j < N; j++) maxerr = std::fmax(maxerr, std::fabs(row[j] * r - z[i * N + j]));
    }
    const bool good = maxerr < 1e-4;
    std::printf("engine (C++17): gemm + GELU + RMSNorm on a %lldx%lld output, max err %.2g\n",
                static_cast<long long>(T), static_cast<long long>(N), maxerr);
    std::printf("[engine] %d ok, %d failed\n", good ? 1 : 0, good ? 0 : 1);
    return good ? 0 : 1;
}
