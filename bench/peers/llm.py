"""Peers for family `llm`: PyTorch eager (impl `torch`), with the case
strings and byte counts of bench/bench_llm.c (see the comment at its top):

  gemvT/<w>/M<m>/N<n>/K<k>: x @ w with w [K, N] row-major (torch.matmul);
    f32 and bf16 (i8: skipped, torch has no int8 op for that layout).
  gemv/<w>/M<m>/N<n>/K<k>: F.linear(x, w) with w [N, K];
    f32: x, w f32; bf16: x, w bf16; i8: torch._weight_int8pack_mm(x, w,
    scales) (x f32... as the op allows: bf16 when f32 is refused), skipped
    with the reason when this torch has no such op.
  decode/<c>/B<b>/H32/Hkv8/D128/L<len>: F.scaled_dot_product_attention of
    q [B, 32, 1, 128] against k, v [B, 8, len, 128] with enable_gqa=True.
  llama/<w>/decode/C4096, llama/<w>/prefill/P512: Hugging Face's
    LlamaForCausalLM (vocab 32000, hidden 2048, 16/4 heads, SwiGLU 5632,
    8 layers; its default attention) with random weights: decode = one
    token after a DynamicCache of 4096 random rows per layer (cropped back
    after each step), prefill = 512 tokens into a new cache, the last
    position's logits (logits_to_keep=1). w: f32; bf16 = the model in bf16;
    i8 = torch's quantize_dynamic (qint8) of the decoder layers' Linears
    (lm_head stays f32, as in kern). impl torch (eager) and torch_compile
    (torch.compile(dynamic=False), compiled outside the timing; i8 not
    measured). Bytes and flops: the C file's formulas.
    impl llama_cpp: llama-cpp-python (`make peers-llamacpp` builds it from
    PyPI's source package; skipped with the reason when it is missing) on
    the same config written as GGUF (random weights; f32 = F32, bf16 =
    BF16, i8 = Q8_0 projections with token_embd and output F32, as kern
    keeps lm_head f32), cached under build/models/llama-gguf/. decode: the
    cache filled by one 4096-token prefill, then each step evaluates one
    token at position 4096 (n_tokens reset, so the step overwrites the same
    cell); prefill: reset, then eval of 512 tokens (n_batch 512).
The weight (the cache) cycles through copies totalling >= 256 MiB, as in
the C file, so each call reads it from DRAM.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(ROOT, "build", "models", "inductor-cache"))
import common  # noqa: E402

FAMILY = "llm"
WDTS = ["f32", "bf16", "i8"]
SHAPES = [(4096, 4096), (11008, 4096)]
MS = [1, 4]
DECODE = [(1, 4096), (1, 16384), (4, 4096)]


def decode_cases(args, torch):
    F = torch.nn.functional
    for c in ["f32", "bf16"]:
        for B, L in DECODE:
            case = "decode/%s/B%d/H32/Hkv8/D128/L%d" % (c, B, L)
            if not common.wanted(args, FAMILY, case, "torch"):
                continue
            tdt = torch.float32 if c == "f32" else torch.bfloat16
            es = 4 if c == "f32" else 2
            cb = B * L * 8 * 128 * es
            copies = (256 << 20) // (2 * cb) + 1
            q = torch.rand(B, 32, 1, 128).to(tdt)
            ks = [torch.rand(B, 8, L, 128).to(tdt) for _ in range(copies)]
            vs = [torch.rand(B, 8, L, 128).to(tdt) for _ in range(copies)]
            skip = None
            try:
                F.scaled_dot_product_attention(q, ks[0], vs[0], enable_gqa=True)
            except Exception as e:
                skip = "sdpa(enable_gqa) failed: %s" % common.first_line(e, 160)
            def one(i):
                with torch.no_grad():
                    return F.scaled_dot_product_attention(q, ks[i], vs[i], enable_gqa=True)
            call = common.rotating(copies, one)
            for t in args.threads:
                if skip is not None:
                    common.emit(FAMILY, case, t, "torch", skipped=skip)
                    continue
                common.set_torch_threads(torch, t)
                s = common.timeit(call, args.quick)
                common.emit(FAMILY, case, t, "torch", s, 4.0 * B * 32 * L * 128, float(2 * cb))
            del ks, vs


LL = dict(vocab=32000, hidden=2048, heads=16, kv=4, hd=128, ffn=5632, layers=8, cache=4096,
          prefill=512)


def ll_bytes_flops(w, prefill):
    """bench_llm.c's ll_weight_bytes / ll_params / ll_prefill_flops."""
    H, F, A, KV, V = LL["hidden"], LL["ffn"], LL["heads"] * LL["hd"], LL["kv"] * LL["hd"], LL["vocab"]
    proj = H * A * 2 + H * KV * 2 + 3 * H * F
    es = 2 if w == "bf16" else 4
    layer = proj + 4 * (A + 2 * KV + H + 2 * F + H) if w == "i8" else proj * es
    wbytes = LL["layers"] * (layer + 2 * H * es) + V * H * es + H * es + H * es
    if prefill:
        P = LL["prefill"]
        return 0.0, float(LL["layers"] * (2 * proj * P + 2.0 * A * P * P) + 2 * V * H)
    kv = 2.0 * LL["layers"] * LL["cache"] * KV * (2 if w == "bf16" else 4)
    return float(wbytes + kv), float(2 * (LL["layers"] * proj + V * H))


def llama_cases(args, torch):
    cases = []
    for prefill in (0, 1):
        for w in WDTS:
            case = ("llama/%s/prefill/P%d" % (w, LL["prefill"]) if prefill
                    else "llama/%s/decode/C%d" % (w, LL["cache"]))
            impls = [i for i in ("torch", "torch_compile") if common.wanted(args, FAMILY, case, i)]
            if impls:
                cases.append((w, prefill, case, impls))
    if not cases:
        return
    try:
        from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM
    except Exception as e:
        for w, prefill, case, impls in cases:
            for impl in impls:
                for t in args.threads:
                    common.emit(FAMILY, case, t, impl, skipped="transformers: %s" % common.first_line(e))
        return
    cfg = LlamaConfig(vocab_size=LL["vocab"], hidden_size=LL["hidden"], intermediate_size=LL["ffn"],
                      num_hidden_layers=LL["layers"], num_attention_heads=LL["heads"],
                      num_key_value_heads=LL["kv"], max_position_embeddings=LL["cache"] + 64,
                      rms_norm_eps=1e-6, tie_word_embeddings=False)

    def new_cache():
        try:
            return DynamicCache(config=cfg)
        except TypeError:
            return DynamicCache()

    for w in WDTS:
        todo = [c for c in cases if c[0] == w]
        if not todo:
            continue
        torch.manual_seed(0)
        model = LlamaForCausalLM(cfg).eval()
        if w == "bf16":
            model = model.to(torch.bfloat16)
        tdt = torch.bfloat16 if w == "bf16" else torch.float32
        qerr = None
        if w == "i8":
            try:
                model.model = torch.ao.quantization.quantize_dynamic(
                    model.model, {torch.nn.Linear}, dtype=torch.qint8)
            except Exception as e:
                qerr = "quantize_dynamic failed: %s" % common.first_line(e, 160)
        g = torch.Generator().manual_seed(5)
        kvs = [(torch.rand(1, LL["kv"], LL["cache"], LL["hd"], generator=g).to(tdt),
                torch.rand(1, LL["kv"], LL["cache"], LL["hd"], generator=g).to(tdt))
               for _ in range(LL["layers"])]
        compiled = None
        for _, prefill, case, impls in todo:
            nbytes, flops = ll_bytes_flops(w, prefill)
            for impl in impls:
                skip = qerr
                m = model
                if skip is None and impl == "torch_compile":
                    if w == "i8":
                        skip = common.COMPILE_INT8_SKIP
                    else:
                        if compiled is None:
                            compiled = torch.compile(model, dynamic=False)
                        m = compiled
                if prefill:
                    ids = torch.randint(0, LL["vocab"], (1, LL["prefill"]), generator=g)

                    def call(m=m, ids=ids):
                        with torch.inference_mode():
                            return m(input_ids=ids, past_key_values=new_cache(), use_cache=True,
                                     logits_to_keep=1)
                else:
                    cache = new_cache()
                    with torch.inference_mode():
                        for li, (k, v) in enumerate(kvs):
                            cache.update(k, v, li)
                    tok = torch.tensor([[7]])
                    pos = torch.tensor([[LL["cache"]]])
                    cp = torch.tensor([LL["cache"]])

                    def call(m=m, cache=cache, tok=tok, pos=pos, cp=cp):
                        with torch.inference_mode():
                            out = m(input_ids=tok, past_key_values=cache, position_ids=pos,
                                    cache_position=cp, use_cache=True, logits_to_keep=1)
                        cache.crop(-1)  # back to LL["cache"] rows (newer transformers
                        return out      # take only the number of rows to drop)
                common.time_threads(args, FAMILY, case, impl, call, torch, flops, nbytes, skip,
                                    compiled=impl == "torch_compile")
        del model, compiled, kvs


def gguf_model(w):
    """The config as a GGUF file (cached): random weights, a byte-level
    placeholder vocabulary (no text is tokenized here)."""
    import numpy as np
    import gguf
    d = os.path.join(ROOT, "build", "models", "llama-gguf")
    path = os.path.join(d, "%s.gguf" % w)
    if os.path.exists(path):
        return path
    os.makedirs(d, exist_ok=True)
    H, F, A, KV, V = LL["hidden"], LL["ffn"], LL["heads"] * LL["hd"], LL["kv"] * LL["hd"], LL["vocab"]
    rng = np.random.default_rng(7)
    qt = {"f32": gguf.GGMLQuantizationType.F32, "bf16": gguf.GGMLQuantizationType.BF16,
          "i8": gguf.GGMLQuantizationType.Q8_0}[w]
    wr = gguf.GGUFWriter(path + ".tmp", "llama")
    wr.add_context_length(LL["cache"] + 64)
    wr.add_embedding_length(H)
    wr.add_block_count(LL["layers"])
    wr.add_feed_forward_length(F)
    wr.add_head_count(LL["heads"])
    wr.add_head_count_kv(LL["kv"])
    wr.add_rope_dimension_count(LL["hd"])
    wr.add_rope_freq_base(10000.0)
    wr.add_layer_norm_rms_eps(1e-6)
    wr.add_vocab_size(V)
    wr.add_file_type({"f32": 0, "bf16": 32, "i8": 7}[w])
    toks = [b"<unk>", b"<s>", b"</s>"] + [("<0x%02X>" % i).encode() for i in range(256)]
    toks += [("t%d" % i).encode() for i in range(V - len(toks))]
    wr.add_tokenizer_model("llama")
    wr.add_token_list(toks)
    wr.add_token_scores([0.0] * V)
    wr.add_token_types([2, 3, 3] + [6] * 256 + [1] * (V - 259))
    wr.add_bos_token_id(1)
    wr.add_eos_token_id(2)

    def rand(*shape):
        return (rng.random(shape, dtype=np.float32) * 2 - 1) / np.float32(np.sqrt(shape[-1]))

    def put(name, arr, q):
        if q == gguf.GGMLQuantizationType.F32:
            wr.add_tensor(name, arr)
        else:
            wr.add_tensor(name, gguf.quants.quantize(arr, q), raw_dtype=q)

    f32 = gguf.GGMLQuantizationType.F32
    put("token_embd.weight", rand(V, H), f32 if w == "i8" else qt)
    for i in range(LL["layers"]):
        put("blk.%d.attn_norm.weight" % i, np.ones(H, np.float32), f32)
        put("blk.%d.ffn_norm.weight" % i, np.ones(H, np.float32), f32)
        for nm, shape in (("attn_q", (A, H)), ("attn_k", (KV, H)), ("attn_v", (KV, H)),
                          ("attn_output", (H, A)), ("ffn_gate", (F, H)), ("ffn_up", (F, H)),
                          ("ffn_down", (H, F))):
            put("blk.%d.%s.weight" % (i, nm), rand(*shape), qt)
    put("output_norm.weight", np.ones(H, np.float32), f32)
    put("output.weight", rand(V, H), f32 if w == "i8" else qt)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    os.replace(path + ".tmp", path)
    return path


def llamacpp_cases(args):
    cases = []
    for prefill in (0, 1):
        for w in WDTS:
            case = ("llama/%s/prefill/P%d" % (w, LL["prefill"]) if prefill
                    else "llama/%s/decode/C%d" % (w, LL["cache"]))
            if common.wanted(args, FAMILY, case, "llama_cpp"):
                cases.append((w, prefill, case))
    if not cases:
        return
    skip = None
    try:
        import llama_cpp
        import gguf  # noqa: F401
    except Exception as e:
        skip = ("llama-cpp-python is not installed here (make peers-llamacpp builds it from "
                "PyPI's source package): %s" % common.first_line(e, 120))
    for w in WDTS:
        todo = [c for c in cases if c[0] == w]
        if not todo:
            continue
        llm, err = None, skip
        if err is None:
            try:
                path = gguf_model(w)
                llm = llama_cpp.Llama(model_path=path, n_ctx=LL["cache"] + 64, n_batch=512,
                                      n_ubatch=512, n_threads=args.threads[-1],
                                      n_threads_batch=args.threads[-1], verbose=False)
            except Exception as e:
                err = "llama.cpp could not load the model: %s" % common.first_line(e, 160)
        filled = False
        for _, prefill, case in todo:
            nbytes, flops = ll_bytes_flops(w, prefill)
            for t in args.threads:
                if err is not None:
                    common.emit(FAMILY, case, t, "llama_cpp", skipped=err)
                    continue
                try:
                    llama_cpp.llama_set_n_threads(llm._ctx.ctx, t, t)
                    if prefill:
                        ids = [(i * 7919) % LL["vocab"] for i in range(LL["prefill"])]

                        def call(ids=ids):
                            llm.reset()
                            llm.eval(ids)
                        filled = False
                    else:
                        if not filled:  # the cache: 4096 tokens, once
                            llm.reset()
                            llm.eval([(i * 7919) % LL["vocab"] for i in range(LL["cache"])])
                            filled = True

                        def call():
                            llm.n_tokens = LL["cache"]
                            llm.eval([7])
                    s = common.timeit(call, args.quick)
                except Exception as e:
                    common.emit(FAMILY, case, t, "llama_cpp",
                                skipped="llama.cpp failed: %s" % common.first_line(e, 160))
                    continue
                common.emit(FAMILY, case, t, "llama_cpp", s, flops, nbytes)
        del llm


def main():
    args = common.parse_args()
    cases = []
    for w in WDTS:
        for N, K in SHAPES:
            for M in MS:
                cases.append((w, M, N, K, "gemv/%s/M%d/N%d/K%d" % (w, M, N, K)))
                cases.append((w, M, N, K, "gemvT/%s/M%d/N%d/K%d" % (w, M, N, K)))
    try:
        import torch
    except Exception as e:  # pragma: no cover
        for _, _, _, _, case in cases:
            for t in args.threads:
                if common.wanted(args, FAMILY, case, "torch"):
                    common.emit(FAMILY, case, t, "torch", skipped="torch not importable: %s" % e)
        return
    F = torch.nn.functional
    for w, M, N, K, case in cases:
        if not common.wanted(args, FAMILY, case, "torch"):
            continue
        es = {"f32": 4, "bf16": 2, "i8": 1}[w]
        wbytes = N * K * es
        nbytes = float(wbytes + (4 * N if w == "i8" else 0))
        copies = (256 << 20) // wbytes + 1
        g = torch.Generator().manual_seed(N + K + M)
        skip = None
        trans = case.startswith("gemvT/")
        if trans and w == "i8":
            for t in args.threads:
                common.emit(FAMILY, case, t, "torch",
                            skipped="torch has no int8 matmul for a [K, N] weight")
            continue
        if w == "i8":
            if not hasattr(torch, "_weight_int8pack_mm"):
                skip = "this torch has no _weight_int8pack_mm"
            ws = [torch.randint(-127, 128, (N, K), dtype=torch.int8, generator=g) for _ in range(copies)]
            sc = torch.rand(N, generator=g) * 0.01
            x = torch.rand(M, K, generator=g)
            if skip is None:
                try:
                    torch._weight_int8pack_mm(x, ws[0], sc)
                except Exception:
                    try:
                        x = x.to(torch.bfloat16)
                        sc = sc.to(torch.bfloat16)
                        torch._weight_int8pack_mm(x, ws[0], sc)
                    except Exception as e:
                        skip = "_weight_int8pack_mm failed: %s" % common.first_line(e, 160)
            call = common.rotating(copies, lambda i: torch._weight_int8pack_mm(x, ws[i], sc))
        else:
            tdt = torch.float32 if w == "f32" else torch.bfloat16
            shape = (K, N) if trans else (N, K)  # gemvT: x @ W with W [K, N]
            ws = [(torch.rand(*shape, generator=g) * 2 - 1).to(tdt) for _ in range(copies)]
            x = (torch.rand(M, K, generator=g) * 2 - 1).to(tdt)
            def one(i):
                with torch.no_grad():
                    return torch.matmul(x, ws[i]) if trans else F.linear(x, ws[i])
            call = common.rotating(copies, one)
        for t in args.threads:
            if skip is not None:
                common.emit(FAMILY, case, t, "torch", skipped=skip)
                continue
            common.set_torch_threads(torch, t)
            s = common.timeit(call, args.quick)
            common.emit(FAMILY, case, t, "torch", s, 2.0 * M * N * K, nbytes)
        del ws
    decode_cases(args, torch)
    llama_cases(args, torch)
    llamacpp_cases(args)


if __name__ == "__main__":
    main()
