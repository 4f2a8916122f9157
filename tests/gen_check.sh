#!/usr/bin/env bash
# gen/kern_gen.py from the command line: bad input gives a message naming
# the problem, exit status 2 and no output file (nor a temporary one);
# a good run writes the header. Prints "[gen_check.sh] N ok, N failed".
set -u
py=${PYTHON:-python3}
gen="$py gen/kern_gen.py"
dir=$(mktemp -d /tmp/kern_gen_check.XXXXXX)
trap 'rm -rf "$dir"' EXIT
ok=0; failed=0
pass() { ok=$((ok+1)); }
fail() { failed=$((failed+1)); echo "FAIL gen_check: $*"; }

# expect_error NAME NEEDLE ARGS...: exit 2, NEEDLE in stderr, $dir/out.h absent
expect_error() {
  local what=$1 needle=$2; shift 2
  rm -f "$dir"/out.h "$dir"/.out.h.*
  out=$("$@" 2>&1); rc=$?
  if [ $rc -ne 2 ]; then fail "$what: exit $rc, want 2: $out"; return; fi
  if ! printf '%s' "$out" | grep -qF -- "$needle"; then fail "$what: no '$needle' in: $out"; return; fi
  if ls -A "$dir" | grep -q "out.h"; then fail "$what: output file left behind"; return; fi
  pass
}

good=tests/gen/bert1.kg
$gen model $good --bind B=1,L=4 -o "$dir/m.h" && grep -q "M_ARENA_SIZE" "$dir/m.h" \
  && grep -q "command: kern_gen.py model $good --bind B=1,L=4" "$dir/m.h" && pass || fail "good model"

printf 'kern-graph 1\ndim B\ninput x f32 [B]\ny = gelu(x, \noutput y\n' > "$dir/bad1.kg"
expect_error "malformed line" "bad1.kg:4" $gen model "$dir/bad1.kg" --bind B=2 -o "$dir/out.h"
expect_error "unbound dim" "symbol 'L' is not bound" $gen model $good --bind B=2 -o "$dir/out.h"
expect_error "unknown bind" "'Q' is not a dim" $gen model $good --bind B=2,L=3,Q=1 -o "$dir/out.h"
printf 'kern-graph 2\n' > "$dir/v2.kg"
expect_error "version" "version 2" $gen model "$dir/v2.kg" -o "$dir/out.h"
printf 'kern-graph 1\ninput x f32 [4]\ny = relu(q)\noutput y\n' > "$dir/undef.kg"
expect_error "undefined name" "'q' is not defined" $gen model "$dir/undef.kg" -o "$dir/out.h"
# attributes tests/gen/fuzz_gen.py found raising out of the generator (a
# traceback, not a message): a non-integer perm, an alpha past the largest
# float, a window that is not two integers
printf 'kern-graph 1\ninput x f32 [2,3,4]\ny = permute(x) perm=0,2,softmax\noutput y\n' > "$dir/perm.kg"
expect_error "perm attribute" "attribute perm=0,2,softmax is not a list of integers" $gen model "$dir/perm.kg" -o "$dir/out.h"
printf 'kern-graph 1\ninput x f32 [2,3,4]\ny = permute(x) perm=0,2,,1\noutput y\n' > "$dir/perm2.kg"
expect_error "perm empty element" "attribute perm=0,2,,1 is not a list of integers" $gen model "$dir/perm2.kg" -o "$dir/out.h"
printf 'kern-graph 1\ninput x f32 [2,4]\nweight w f32 [3,4]\ny = linear(x, w) alpha=1e308\noutput y\n' > "$dir/alpha.kg"
expect_error "alpha attribute" "attribute alpha=1e308 is not a finite number" $gen model "$dir/alpha.kg" -o "$dir/out.h"
printf 'kern-graph 1\ninput q f32 [1,2,3,8]\ny = sdpa(q, q, q) window=3\noutput y\n' > "$dir/win.kg"
expect_error "window attribute" "attribute window=3 is not 2 integers" $gen model "$dir/win.kg" -o "$dir/out.h"
# and where the generator took what the executor's reader refuses (the
# same mutants through kern-run): a flag other than 0 or 1, a symbol in a
# weight's shape, whitespace other than ' ' and tab
printf 'kern-graph 1\ninput q f32 [1,2,3,8]\ny = sdpa(q, q, q) is_causal=7\noutput y\n' > "$dir/flag.kg"
expect_error "flag attribute" "attribute is_causal=7: expected 0 or 1" $gen model "$dir/flag.kg" -o "$dir/out.h"
printf 'kern-graph 1\ndim L\ninput x f32 [L,4]\nweight w f32 [L,4]\ny = add(x, w)\noutput y\n' > "$dir/wsym.kg"
expect_error "symbolic weight" "weight shapes are concrete" $gen model "$dir/wsym.kg" --bind L=4 -o "$dir/out.h"
printf 'kern-graph\xe2\x80\x871\ninput x f32 [4]\ny = relu(x)\noutput y\n' > "$dir/uws.kg"
expect_error "unicode space" "column 11: unexpected character" $gen model "$dir/uws.kg" -o "$dir/out.h"
printf 'kern-graph 1\ninput x f32 [2,4]\ny, z = split(x) axis=1 sizes=2,2 perm=1,0\noutput y\n' > "$dir/opattr.kg"
expect_error "attribute of another op" "attribute 'perm' does not apply to op 'split'" $gen model "$dir/opattr.kg" -o "$dir/out.h"
printf 'kern-graph 1\ninput x f32 [2,4]\nweight w f32 [3,4]\nweight b f32 [7]\nd = linear(x, w, b)\ny = relu(x)\noutput y\n' > "$dir/deadbias.kg"
expect_error "dead node checked" "bias must be [3]" $gen model "$dir/deadbias.kg" -o "$dir/out.h"
printf 'kern-graph 1\nconst c i32 [2] 0,1e30\ny = copy(c)\noutput y\n' > "$dir/cint.kg"
expect_error "integer constant" "value 1e+30 (element 1) is not an integer that i32 holds" $gen model "$dir/cint.kg" -o "$dir/out.h"
printf 'kern-graph 1\ndim B\nconst c f16 [2] 1e10,-1e10\ny = copy(c)\noutput y\n' > "$dir/chalf.kg"
$gen model "$dir/chalf.kg" -o "$dir/chalf.h" && grep -q "0x7c00, 0xfc00" "$dir/chalf.h" \
  && grep -q "binding: B=unbound (unused)" "$dir/chalf.h" && pass || fail "f16 constant past 65504, unused dim"
# the op table (ops, input slots, attributes) is the executor's
$py tests/gen/op_table_check.py > "$dir/optab.txt" 2>&1 && pass || fail "op table: $(cat "$dir/optab.txt")"
printf 'kern-graph 1\ninput x f32 [4]\na = relu(b)\nb = relu(a)\noutput a\n' > "$dir/cycle.kg"
expect_error "cycle" "cycle" $gen model "$dir/cycle.kg" -o "$dir/out.h"
# sparse24_linear and sdpa_relpos: the executor's checks, named
printf 'kern-graph 1\ninput x f32 [4,6]\nweight w f32 [4,6]\ny = sparse24_linear(x, w)\noutput y\n' > "$dir/s24.kg"
expect_error "2:4 K" "K=6 is not a multiple of 4" $gen model "$dir/s24.kg" -o "$dir/out.h"
printf 'kern-graph 1\ninput x f32 [4,4]\nweight w f32 [4,4]\ny = sparse24_linear(x, w) act=silu\noutput y\n' > "$dir/s24a.kg"
expect_error "2:4 act" "takes none, gelu or gelu_tanh" $gen model "$dir/s24a.kg" -o "$dir/out.h"
printf 'kern-graph 1\ninput x f32 [4,4]\ninput w f32 [4,4]\ny = sparse24_linear(x, w)\noutput y\n' > "$dir/s24w.kg"
expect_error "2:4 weight input" "must be a graph weight" $gen model "$dir/s24w.kg" -o "$dir/out.h"
# --sparsify: a linear whose epilogue 2:4 lacks (SiLU) or whose K is not a
# multiple of 4 stays a linear, and the banner says why, as the plan report
printf 'kern-graph 1\ninput x f32 [4,8]\nweight w f32 [4,8]\nweight v f32 [4,6]\ninput z f32 [4,6]\na = linear(x, w) act=silu\nb = linear(x, w) act=gelu\nc = linear(z, v)\noutput a\noutput b\noutput c\n' > "$dir/sp.kg"
$gen model "$dir/sp.kg" --sparsify '*' -o "$dir/sp.h" && grep -q "no sparsify: 'a': act silu" "$dir/sp.h" \
  && grep -q "sparsify: 'b' -> sparse24_linear" "$dir/sp.h" && grep -q "no sparsify: 'c': K=6" "$dir/sp.h" \
  && pass || fail "--sparsify report"
# --quantize and --sparsify on the same linears: qlinear prune=1 (silu
# too: qlinear's epilogue), K = 6 quantized only, as the plan report
$gen model "$dir/sp.kg" --quantize '*' --sparsify '*' -o "$dir/spq.h" \
  && grep -q "quantize+sparsify: 'a' -> qlinear (2:4 pruned at plan time)" "$dir/spq.h" \
  && grep -q "no sparsify: 'c': K=6 is not a multiple of 4 (quantized only)" "$dir/spq.h" \
  && grep -q "quantize: 'c' -> qlinear" "$dir/spq.h" && grep -q "kern_sparse24_prune" "$dir/spq.h" \
  && pass || fail "--quantize with --sparsify report"
printf 'kern-graph 1\ninput x f32 [4,6]\nweight w f32 [4,6]\ny = qlinear(x, w) prune=1\noutput y\n' > "$dir/q24.kg"
expect_error "qlinear prune K" "prune=1: K=6 is not a multiple of 4" $gen model "$dir/q24.kg" -o "$dir/out.h"
rp='kern-graph 1\ninput q f32 [1,2,12,8]\nweight rw f32 [7,8]\n'
printf "${rp}weight rh f32 [5,8]\ny = sdpa_relpos(q, q, q, rh, rh)\noutput y\n" > "$dir/rp1.kg"
expect_error "relpos grid" "L=12 but the tables give a 3 x 3 grid" $gen model "$dir/rp1.kg" -o "$dir/out.h"
printf "${rp}weight rh f32 [4,8]\ny = sdpa_relpos(q, q, q, rh, rw)\noutput y\n" > "$dir/rp2.kg"
expect_error "relpos even table" "must be 2*g-1" $gen model "$dir/rp2.kg" -o "$dir/out.h"
printf "${rp}weight rh f32 [5,4]\ny = sdpa_relpos(q, q, q, rh, rw)\noutput y\n" > "$dir/rp3.kg"
expect_error "relpos table D" "must be [2*g-1, D]" $gen model "$dir/rp3.kg" -o "$dir/out.h"
# tests/gen/llama_tiny.kg is gen/llama_ir.py's output for the command in
# its first line
lt_cmd=$(sed -n '2s/^# gen\/llama_ir.py //p' tests/gen/llama_tiny.kg)
$py gen/llama_ir.py $lt_cmd -o "$dir/lt.kg" && cmp -s "$dir/lt.kg" tests/gen/llama_tiny.kg \
  && pass || fail "tests/gen/llama_tiny.kg differs from gen/llama_ir.py $lt_cmd"
# the KV cache: caches must be graph inputs (written in place), an i8 one
# needs its scales; a kv_append whose output nobody reads still runs
kvh='kern-graph 1\ninput kn f32 [1,1,2,8]\ninput vn f32 [1,1,2,8]\ninput kl i32 [1]\n'
printf "${kvh}weight kc f32 [1,4,2,8]\ninput vc f32 [1,4,2,8]\nn = kv_append(kn, vn, kc, vc, kl)\noutput n\n" > "$dir/kv1.kg"
expect_error "kv cache not an input" "k_cache and v_cache must be graph inputs" $gen model "$dir/kv1.kg" -o "$dir/out.h"
printf "${kvh}input kc i8 [1,4,2,8]\ninput vc f32 [1,4,2,8]\nn = kv_append(kn, vn, kc, vc, kl)\noutput n\n" > "$dir/kv2.kg"
expect_error "i8 cache without scales" "an i8 k_cache needs k_scale" $gen model "$dir/kv2.kg" -o "$dir/out.h"
printf "${kvh}input kc f32 [1,4,2,8]\ninput vc f32 [1,4,2,8]\nq = copy(kn)\nn = kv_append(kn, vn, kc, vc, kl)\noutput q\n" > "$dir/kv3.kg"
$gen model "$dir/kv3.kg" -o "$dir/kv3.h" && grep -q "kern_kv_append_ex(ctx" "$dir/kv3.h" && pass || fail "unused kv_append kept"
printf "${kvh}input kc f32 [1,4,2,8]\ninput vc f32 [1,4,2,8]\ninput q f32 [1,1,3,8]\nn = kv_append(kn, vn, kc, vc, kl)\ny = decode_attention(q, kc, vc, n)\noutput y\n" > "$dir/kv4.kg"
expect_error "decode heads" "q's heads are not a multiple of the cache's" $gen model "$dir/kv4.kg" -o "$dir/out.h"
printf 'kern-graph 1\ninput x f32 [4,4]\nweight w i8 [4,4]\ny = qlinear(x, w)\noutput y\n' > "$dir/q8.kg"
expect_error "i8 weight, no scales" "an i8 weight needs scales f32 [N]" $gen model "$dir/q8.kg" -o "$dir/out.h"
printf 'kern-graph 1\ninput x bf16 [4,4]\nweight w f32 [4,4]\ny = linear(x, w)\noutput y\n' > "$dir/dt.kg"
expect_error "linear dtypes" "x and weight must have the same dtype" $gen model "$dir/dt.kg" -o "$dir/out.h"
$gen model "$dir/dt.kg" --quantize '*' -o "$dir/dq.h" 2>/dev/null; [ $? -eq 2 ] && pass || fail "quantized linear of mixed dtypes"
$gen model $good --bind B=1,L=4 --quantize 'l0.q*,l0.out' -o "$dir/q.h" \
  && grep -q "quantize: 'l0.query' -> qlinear" "$dir/q.h" && grep -q "quantize: 'l0.out' -> qlinear" "$dir/q.h" \
  && ! grep -q "quantize: 'l0.key'" "$dir/q.h" && grep -q "kern_qweight_pack(ctx" "$dir/q.h" \
  && pass || fail "--quantize globs"
printf 'kern-graph 1\ninput x f32 [4,3]\nweight w f32 [5,4]\ny = linear(x, w)\noutput y\n' > "$dir/shape.kg"
expect_error "bad shape" "node 'y' (linear" $gen model "$dir/shape.kg" -o "$dir/out.h"
expect_error "missing file" "cannot read" $gen model "$dir/nope.kg" -o "$dir/out.h"

# standalone GEMM instance
$gen gemm --m 3 --n 20 --k 9 -o "$dir/g.h" && grep -q "G_PACKED_FLOATS ((size_t)288)" "$dir/g.h" \
  && pass || fail "gemm instance"
$gen gemm --dtype bf16 --m 3 --n 20 --k 9 -o "$dir/gb.h" && grep -q "GB_PACKED_ELEMS ((size_t)288)" "$dir/gb.h" \
  && grep -q "instance: gemm bf16 M=3 N=20 K=9" "$dir/gb.h" && pass || fail "gemm bf16 instance"
expect_error "gemm dtype" "--dtype must be 'f32' or 'bf16', not 'f16'" $gen gemm --m 1 --n 8 --k 8 --dtype f16 -o "$dir/out.h"

# standalone int8 dynamic linear instance; K past kern_qlinear's limit, a bad blocking
$gen qlinear --m 2 --n 40 --k 20 -o "$dir/q.h" && grep -q "Q_PACKED_BYTES ((size_t)1536)" "$dir/q.h" \
  && grep -q "Q_WORK_BYTES ((size_t)136)" "$dir/q.h" && pass || fail "qlinear instance"
expect_error "qlinear k" "limit (131071)" $gen qlinear --m 1 --n 8 --k 200000 -o "$dir/out.h"
expect_error "qlinear blocking" "MR in 1..3" $gen qlinear --m 1 --n 8 --k 8 --blocking 5,4 -o "$dir/out.h"

# standalone norm instance; H not a multiple of 8, an unknown kind
$gen norm --rows 4 --h 64 --kind rms -o "$dir/n.h" && grep -q "N_HIDDEN 64" "$dir/n.h" && pass || fail "norm instance"
expect_error "norm h" "multiple of 8" $gen norm --rows 4 --h 60 -o "$dir/out.h"
expect_error "norm kind" "--kind must be" $gen norm --rows 4 --h 64 --kind batch -o "$dir/out.h"
$gen norm --dtype bf16 --rows 4 --h 64 --kind rms -o "$dir/nb.h" && grep -q "instance: rms_norm bf16 (weight bf16)" "$dir/nb.h" \
  && grep -q "const uint16_t \*weight" "$dir/nb.h" && pass || fail "norm bf16 instance"
$gen norm --dtype bf16 --weight-dtype f32 --rows 4 --h 64 -o "$dir/nf.h" && grep -q "const float \*weight" "$dir/nf.h" \
  && pass || fail "norm bf16 instance, f32 weight"
expect_error "norm dtype" "--dtype must be 'f32' or 'bf16', not 'f16'" $gen norm --dtype f16 --rows 4 --h 64 -o "$dir/out.h"
expect_error "norm weight dtype" "--weight-dtype must be 'f32' with --dtype f32, not 'bf16'" $gen norm --weight-dtype bf16 --rows 4 --h 64 -o "$dir/out.h"
expect_error "norm weight dtype" "--weight-dtype must be 'f32' or 'bf16', not 'i8'" $gen norm --dtype bf16 --weight-dtype i8 --rows 4 --h 64 -o "$dir/out.h"

# standalone attention instance; bad head grouping, D not a multiple of 8
$gen sdpa --hq 8 --hkv 2 --lk 64 --d 32 -o "$dir/s.h" && grep -q "Hq=8 Hkv=2 Lq=1 Lk=64 D=32" "$dir/s.h" && pass || fail "sdpa instance"
expect_error "sdpa groups" "not a multiple of --hkv" $gen sdpa --hq 6 --hkv 4 --lk 8 --d 32 -o "$dir/out.h"
expect_error "sdpa d" "multiple of 8" $gen sdpa --hq 2 --lk 8 --d 30 -o "$dir/out.h"
$gen sdpa --dtype bf16 --hq 8 --hkv 2 --lk 64 --d 32 -o "$dir/sb.h" && grep -q "instance: sdpa bf16 Hq=8" "$dir/sb.h" \
  && pass || fail "sdpa bf16 instance"
expect_error "sdpa dtype" "--dtype must be 'f32' or 'bf16', not 'f16'" $gen sdpa --dtype f16 --hq 2 --lk 8 --d 32 -o "$dir/out.h"
expect_error "sdpa bf16 state" "bf16 also holds q" $gen sdpa --dtype bf16 --hq 64 --hkv 1 --lk 8 --d 128 -o "$dir/out.h"

# autotune: a real (tiny) tuning run writes the cache, the next replays it
# without timing; a corrupt, foreign or old cache is refused
tc="$dir/tune.json"
$gen gemm --m 2 --n 16 --k 8 --autotune --tune-cache "$tc" -o "$dir/t1.h" \
  && grep -q "autotune: gemm/f32/M2/N16/K8: mr=.*candidates" "$dir/t1.h" && grep -q '"format": "kern-gen-autotune"' "$tc" \
  && pass || fail "autotune run"
$gen gemm --m 2 --n 16 --k 8 --autotune --tune-cache "$tc" -o "$dir/t2.h" \
  && grep -q "autotune: gemm/f32/M2/N16/K8: .*(cache)" "$dir/t2.h" && pass || fail "autotune replay"
# bf16 tunes under its own key, beside the f32 entry of the same shape
$gen gemm --dtype bf16 --m 2 --n 16 --k 8 --autotune --tune-cache "$tc" -o "$dir/t3.h" \
  && grep -q "autotune: gemm/bf16/M2/N16/K8: mr=.*candidates" "$dir/t3.h" && grep -q '"gemm/f32/M2/N16/K8"' "$tc" \
  && grep -q '"gemm/bf16/M2/N16/K8"' "$tc" && pass || fail "autotune bf16 run"
printf '{"format": "kern-gen-autotune", "version": 1, "cpu"' > "$dir/bad.json"
expect_error "corrupt cache" "is corrupt" $gen gemm --m 2 --n 16 --k 8 --autotune --tune-cache "$dir/bad.json" -o "$dir/out.h"
sed 's/"cpu": "[^"]*"/"cpu": "Other CPU | avx512f"/' "$tc" > "$dir/foreign.json"
expect_error "foreign cache" "another CPU" $gen gemm --m 2 --n 16 --k 8 --autotune --tune-cache "$dir/foreign.json" -o "$dir/out.h"
sed 's/"version": 3/"version": 2/' "$tc" > "$dir/old.json"
expect_error "old cache" "format version 2" $gen gemm --m 2 --n 16 --k 8 --autotune --tune-cache "$dir/old.json" -o "$dir/out.h"
# the thread split: timed on kern's pool at --threads 2, then replayed
$gen gemm --m 2 --n 40 --k 8 --autotune --threads 2 --tune-cache "$tc" -o "$dir/t4.h" \
  && grep -q "autotune: gemm/f32/M2/N40/K8: [0-9]* tasks per thread at 2 threads, .* us (1: " "$dir/t4.h" \
  && grep -q '"tpt": {' "$tc" && pass || fail "autotune thread split"
$gen gemm --m 2 --n 40 --k 8 --autotune --threads 2 --tune-cache "$tc" -o "$dir/t5.h" \
  && grep -q "autotune: gemm/f32/M2/N40/K8: [0-9]* tasks per thread at 2 threads (cache)" "$dir/t5.h" \
  && pass || fail "autotune thread split replay"
sed 's/"tpt": {/"tpt": {"2": 3, "x": 1/' "$tc" > "$dir/badtpt.json"
expect_error "cache tpt" "is corrupt" $gen gemm --m 2 --n 40 --k 8 --autotune --threads 2 --tune-cache "$dir/badtpt.json" -o "$dir/out.h"
# the Q/K/V merge as a timed fusion choice (instances at --specialize-max-m)
printf 'kern-graph 1\ndim L\ninput x f32 [L,8]\nweight wq f32 [8,8]\nweight wk f32 [8,8]\nweight wv f32 [8,8]\nq = linear(x, wq)\nk = linear(x, wk)\nv = linear(x, wv)\ny = concat(q, k, v) axis=-1\noutput y\n' > "$dir/qkv.kg"
$gen model "$dir/qkv.kg" --bind L=3 --specialize-max-m 8 --autotune --threads 1 --tune-cache "$tc" -o "$dir/m1.h" \
  && grep -q "autotune: fuse/qkv/f32/M3/K8/N8+8+8/t1: \(merged\|apart\) (one GEMM" "$dir/m1.h" \
  && grep -q '"fuse/qkv/f32/M3/K8/N8+8+8/t1"' "$tc" && pass || fail "autotune fusion choice"
$gen model "$dir/qkv.kg" --bind L=3 --specialize-max-m 8 --autotune --threads 1 --tune-cache "$tc" -o "$dir/m2.h" \
  && grep -q "autotune: fuse/qkv/f32/M3/K8/N8+8+8/t1: .* (cache)" "$dir/m2.h" && pass || fail "autotune fusion replay"
# decode_attention: the instance or kern_decode_attention, timed (both run
# whole on the same tensors), then replayed; a corrupt entry is refused
printf 'kern-graph 1\ninput l i64 [1]\ninput q f32 [1,1,4,16]\ninput k i8 [1,40,2,16]\ninput v i8 [1,40,2,16]\ninput ks f32 [1,40,2]\ninput vs f32 [1,40,2]\ny = decode_attention(q, k, v, l, ks, vs)\noutput y\n' > "$dir/da.kg"
$gen model "$dir/da.kg" --specialize-max-m 8 --autotune --threads 1 --tune-cache "$tc" -o "$dir/d1.h" \
  && grep -q "autotune: dattn/f32/i8/i8/B1/Lq1/H4/Hkv2/D16/Dv16/L40/t1: \(instance, split 128\|library\) (split 128 .* us; kern_decode_attention" "$dir/d1.h" \
  && grep -q '"us_library"' "$tc" && pass || fail "autotune decode attention"
$gen model "$dir/da.kg" --specialize-max-m 8 --autotune --threads 1 --tune-cache "$tc" -o "$dir/d2.h" \
  && grep -q "autotune: dattn/f32/i8/i8/B1/Lq1/H4/Hkv2/D16/Dv16/L40/t1: .* (cache)" "$dir/d2.h" \
  && pass || fail "autotune decode attention replay"
sed 's/"instance": \(true\|false\)/"instance": 1/' "$tc" > "$dir/badda.json"
expect_error "cache dattn" "is corrupt" $gen model "$dir/da.kg" --specialize-max-m 8 --autotune --tune-cache "$dir/badda.json" -o "$dir/out.h"
sed 's/"split": 128/"split": 100/' "$tc" > "$dir/badsp.json"
expect_error "cache dattn split" "is corrupt" $gen model "$dir/da.kg" --specialize-max-m 8 --autotune --tune-cache "$dir/badsp.json" -o "$dir/out.h"
# qlinear instances: the blockings timed (standalone, and a model's
# instances under --quantize), replayed; a corrupt entry is refused
$gen qlinear --m 3 --n 40 --k 24 --autotune --threads 1 --tune-cache "$tc" -o "$dir/ql1.h" \
  && grep -q "autotune: qlinear/M3/N40/K24/t1: mr=[123] unroll=[1248], .* us (the default .* us; [0-9]* candidates" "$dir/ql1.h" \
  && grep -q '"qlinear/M3/N40/K24/t1"' "$tc" && pass || fail "autotune qlinear"
$gen qlinear --m 3 --n 40 --k 24 --autotune --threads 1 --tune-cache "$tc" -o "$dir/ql2.h" \
  && grep -q "autotune: qlinear/M3/N40/K24/t1: mr=[123] unroll=[1248] (cache)" "$dir/ql2.h" && pass || fail "autotune qlinear replay"
printf 'kern-graph 1\ninput x f32 [3,24]\nweight w f32 [40,24]\ny = linear(x, w)\noutput y\n' > "$dir/ql.kg"
$gen model "$dir/ql.kg" --quantize '*' --specialize-max-m 8 --autotune --threads 1 --tune-cache "$tc" -o "$dir/ql3.h" \
  && grep -q "autotune: qlinear/M3/N40/K24/t1: .* (cache)" "$dir/ql3.h" \
  && grep -q "qlinear instances: M=3 N=40 K=24 (mr=[123] unroll=[1248])" "$dir/ql3.h" && pass || fail "autotune model qlinear"
$py -c 'import json, sys; c = json.load(open(sys.argv[1])); c["entries"]["qlinear/M3/N40/K24/t1"]["unroll"] = 3; json.dump(c, open(sys.argv[2], "w"))' "$tc" "$dir/badql.json"
expect_error "cache qlinear" "is corrupt" $gen qlinear --m 3 --n 40 --k 24 --autotune --tune-cache "$dir/badql.json" -o "$dir/out.h"
expect_error "qlinear blocking tune" "both choose" $gen qlinear --m 1 --n 8 --k 8 --blocking 2,4 --autotune -o "$dir/out.h"
# the standalone command: the splits timed (300 rows: 64, 128, 256, 512
# make 5, 3, 2, 1 tasks), the fastest kept, then replayed
$gen decode_attention --h 4 --hkv 2 --d 16 --lmax 300 --autotune --threads 1 --tune-cache "$tc" -o "$dir/da1.h" \
  && grep -q "autotune: dattn/f32/f32/f32/B1/Lq1/H4/Hkv2/D16/Dv16/L300/t1: instance, split [0-9]* (split 128 .* us, split 64 .* us, split 256 .* us, split 512 .* us; kern_decode_attention" "$dir/da1.h" \
  && grep -q "#define DA1_SPLIT" "$dir/da1.h" && pass || fail "autotune standalone decode attention"
$gen decode_attention --h 4 --hkv 2 --d 16 --lmax 300 --autotune --threads 1 --tune-cache "$tc" -o "$dir/da2.h" \
  && grep -q "autotune: dattn/f32/f32/f32/B1/Lq1/H4/Hkv2/D16/Dv16/L300/t1: instance, split [0-9]* (cache)" "$dir/da2.h" \
  && pass || fail "autotune standalone decode attention replay"
$gen decode_attention --dtype bf16 --cache i8 --batch 2 --lq 2 --h 8 --hkv 2 --d 24 --dv 16 --lmax 77 --layout bhsd --lens i64 -o "$dir/da3.h" \
  && grep -q "instance: decode_attention q bf16, caches i8 (bhsd), k_lens i64: B=2 Lq=2 H=8 Hkv=2 D=24 Dv=16 Lmax=77 scale=.* split=128" "$dir/da3.h" \
  && grep -q "const int64_t \*k_lens, const float \*k_scale" "$dir/da3.h" && pass || fail "decode attention instance"
expect_error "decode attention groups" "not a multiple of --hkv" $gen decode_attention --h 6 --hkv 4 --d 16 --lmax 8 -o "$dir/out.h"
expect_error "decode attention d" "multiples of 8" $gen decode_attention --h 2 --d 16 --dv 12 --lmax 8 -o "$dir/out.h"
expect_error "decode attention lq" "--lq 9 is outside" $gen decode_attention --h 2 --lq 9 --d 16 --lmax 8 -o "$dir/out.h"
expect_error "decode attention rows" "do not fit" $gen decode_attention --h 64 --lq 4 --d 128 --lmax 8 -o "$dir/out.h"
expect_error "decode attention cache" "--cache must be" $gen decode_attention --cache u8 --h 2 --d 16 --lmax 8 -o "$dir/out.h"
expect_error "decode attention layout" "--layout must be" $gen decode_attention --layout bsdh --h 2 --d 16 --lmax 8 -o "$dir/out.h"
expect_error "decode attention split" "--split must be one of" $gen decode_attention --split 100 --h 2 --d 16 --lmax 8 -o "$dir/out.h"
expect_error "decode attention split tune" "both choose" $gen decode_attention --split 64 --autotune --h 2 --d 16 --lmax 8 -o "$dir/out.h"

# --safetensors: the file's tensors must be the graph's weights (name,
# dtype, shape); a file that is not safetensors is refused
$py tests/gen/write_st.py $good B=1,L=4 "$dir/w.st" \
  && $gen model $good --bind B=1,L=4 --safetensors "$dir/w.st" -o "$dir/st.h" \
  && grep -q "st_prepare_safetensors" "$dir/st.h" && pass || fail "safetensors model"
printf 'kern-graph 1\ninput x f32 [2,4]\nweight extra f32 [4]\nz = add(x, extra)\noutput z\n' > "$dir/st2.kg"
expect_error "safetensors missing weight" "no tensor 'extra'" $gen model "$dir/st2.kg" --safetensors "$dir/w.st" -o "$dir/out.h"
printf 'kern-graph 1\ninput x f32 [2,8]\nweight embeddings.LayerNorm.bias f32 [8]\ny = add(x, embeddings.LayerNorm.bias)\noutput y\n' > "$dir/st3.kg"
expect_error "safetensors shape" "the graph wants f32 [8]" $gen model "$dir/st3.kg" --safetensors "$dir/w.st" -o "$dir/out.h"
printf 'not a safetensors file at all' > "$dir/bad.st"
expect_error "not safetensors" "does not fit the file" $gen model $good --bind B=1,L=4 --safetensors "$dir/bad.st" -o "$dir/out.h"

echo "[gen_check.sh] $ok ok, $failed failed"
[ $failed -eq 0 ]
