"""Peers for family `norm`: PyTorch eager (impl `torch`) and torch.compile of
the same function (impl `torch_compile`), with the case strings and byte
counts of bench/bench_norm.c (see the comment at its top):

  fwd/ln_gelu: y = gelu(layer_norm(x, w, b))
  fwd/res_ln:  h = x + r; y = layer_norm(h, w, b); returns (y, h)
  fwd/rms:     y = rms_norm(x, w)
  bwd/*:       autograd of the same function w.r.t. its inputs and weights,
               the forward run once outside the timing (retain_graph=True);
               res_ln gets gradients for both y and h.

torch.compile is compiled (and warmed up) outside the timing; if it fails in
this environment the rows are reported as skipped with the reason.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

FAMILY = "norm"
SHAPES = [(4096, 768), (4096, 4096), (16384, 1024), (1, 4096)]
DTYPES = ["f32", "bf16"]
OPS = ["ln_gelu", "res_ln", "rms"]
EPS = 1e-5


def case_bytes(op, bwd, dt, R, H):
    es = 4 if dt == "f32" else 2
    m, v, st = R * H * es, H * es, R * 4
    if not bwd:
        return {"ln_gelu": 2 * m + 2 * v, "res_ln": 4 * m + 2 * v, "rms": 2 * m + v}[op]
    return {"ln_gelu": 3 * m + 4 * v + 2 * st, "res_ln": 4 * m + 3 * v + 2 * st,
            "rms": 3 * m + 2 * v + st}[op]


def make_fn(torch, op, H):
    F = torch.nn.functional
    if op == "ln_gelu":
        def f(x, w, b):
            return F.gelu(F.layer_norm(x, (H,), w, b, EPS))
    elif op == "res_ln":
        def f(x, r, w, b):
            h = x + r
            return F.layer_norm(h, (H,), w, b, EPS), h
    else:
        def f(x, w):
            return F.rms_norm(x, (H,), w, EPS)
    return f


def make_inputs(torch, op, dt, R, H, grad):
    tdt = torch.float32 if dt == "f32" else torch.bfloat16
    g = torch.Generator().manual_seed(R * 7 + H)

    def t(*shape):
        return (torch.rand(*shape, generator=g) * 2 - 1).to(tdt).requires_grad_(grad)

    if op == "ln_gelu":
        return [t(R, H), t(H), t(H)]
    if op == "res_ln":
        return [t(R, H), t(R, H), t(H), t(H)]
    return [t(R, H), t(H)]


def runner(torch, fn, op, dt, R, H, bwd):
    """Returns a zero-argument callable doing the timed work."""
    if not bwd:
        ins = make_inputs(torch, op, dt, R, H, False)

        def fwd():
            with torch.no_grad():
                return fn(*ins)
        return fwd
    ins = make_inputs(torch, op, dt, R, H, True)
    outs = fn(*ins)
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    grads = [torch.rand_like(o) * 2 - 1 for o in outs]

    def bwd_call():
        return torch.autograd.grad(outs, ins, grads, retain_graph=True)
    return bwd_call


def main():
    args = common.parse_args()
    try:
        import torch
    except Exception as e:  # pragma: no cover
        for bwd in (0, 1):
            for op in OPS:
                for dt in DTYPES:
                    for R, H in SHAPES:
                        case = "%s/%s/%s/R%d/H%d" % ("bwd" if bwd else "fwd", op, dt, R, H)
                        for t in args.threads:
                            for impl in ("torch", "torch_compile"):
                                if common.wanted(args, FAMILY, case, impl):
                                    common.emit(FAMILY, case, t, impl, skipped="torch not importable: %s" % e)
        return
    compile_error = None
    for bwd in (0, 1):
        for op in OPS:
            for dt in DTYPES:
                for R, H in SHAPES:
                    case = "%s/%s/%s/R%d/H%d" % ("bwd" if bwd else "fwd", op, dt, R, H)
                    nbytes = float(case_bytes(op, bwd, dt, R, H))
                    want_eager = common.wanted(args, FAMILY, case, "torch")
                    want_comp = common.wanted(args, FAMILY, case, "torch_compile")
                    if not (want_eager or want_comp):
                        continue
                    fn = make_fn(torch, op, H)
                    if want_eager:
                        call = runner(torch, fn, op, dt, R, H, bwd)
                        for t in args.threads:
                            common.set_torch_threads(torch, t)
                            s = common.timeit(call, args.quick)
                            common.emit(FAMILY, case, t, "torch", s, 0.0, nbytes)
                        del call
                    if want_comp:
                        if compile_error is None:
                            try:
                                common.set_torch_threads(torch, args.threads[0])
                                cfn = torch.compile(fn, dynamic=False)
                                call = runner(torch, cfn, op, dt, R, H, bwd)
                                call()  # compile and warm up outside the timing
                            except Exception as e:  # report, never fake
                                compile_error = "torch.compile failed: %s" % common.first_line(e, 200)
                        for t in args.threads:
                            if compile_error is not None:
                                common.emit(FAMILY, case, t, "torch_compile", skipped=compile_error)
                                continue
                            common.set_torch_threads(torch, t)
                            call()  # Inductor compiles again for a new thread count
                            s = common.timeit(call, args.quick)
                            common.emit(FAMILY, case, t, "torch_compile", s, 0.0, nbytes)
                        call = None


if __name__ == "__main__":
    main()
