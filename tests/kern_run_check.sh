#!/usr/bin/env bash
# Checks build/kern-run end to end on a small model written here as IR:
# random weights, random inputs, profile, --check, --out / --inputs round
# trip, --dot, and the error exits (bad IR line, missing weights file,
# missing weight, unbound dims). Prints "[kern_run_check.sh] N ok, N failed".
set -u
bin=${KERN_RUN:-build/kern-run}
dir=$(mktemp -d /tmp/kern_run_check.XXXXXX)
trap 'rm -rf "$dir"' EXIT
ok=0; failed=0
pass() { ok=$((ok+1)); }
fail() { failed=$((failed+1)); echo "FAIL kern_run_check: $*"; }

cat > "$dir/m.kg" <<'EOF'
kern-graph 1
dim B
dim L
input ids i64 [B,L]
input x f32 [B,L,16]
weight emb f32 [50,16]
weight w1 f32 [32,16]
weight b1 f32 [32]
weight w2 f32 [16,32]
const half f32 [] 0.5
e = embedding(ids, emb)
s = add(e, x)
h = linear(s, w1, b1)
g = gelu(h)
y = linear(g, w2)
z = add(y, s)
n = layer_norm(z) eps=1e-05
o = mul(n, half)
output o
EOF

out=$("$bin" "$dir/m.kg" --random-weights --bind B=2,L=7 --runs 3 --check --dot "$dir/m.dot" --report --out "$dir/o.safetensors" 2>&1)
rc=$?
if [ $rc -eq 0 ] && echo "$out" | grep -q "check: ok" && echo "$out" | grep -q "output o: f32 \[2,7,16\]" \
   && echo "$out" | grep -q "GFLOP/s" && echo "$out" | grep -q "fuse: linear"; then pass; else fail "run/check (rc=$rc): $out"; fi
if [ -s "$dir/m.dot" ] && head -1 "$dir/m.dot" | grep -q "digraph"; then pass; else fail "dot file"; fi
if [ -s "$dir/o.safetensors" ]; then pass; else fail "--out file"; fi

# the outputs file read back as inputs of a model that copies them
cat > "$dir/c.kg" <<'EOF'
kern-graph 1
dim B
dim L
input o f32 [B,L,16]
r = relu(o)
output r
EOF
out=$("$bin" "$dir/c.kg" --inputs "$dir/o.safetensors" --runs 1 2>&1)
if [ $? -eq 0 ] && echo "$out" | grep -q "output r: f32 \[2,7,16\]" && echo "$out" | grep -q "bind B=2,L=7"; then pass; else fail "--inputs: $out"; fi

# errors
printf 'kern-graph 1\ndim B\ninput x f32 [B]\ny = gelu(x, \n' > "$dir/bad.kg"
out=$("$bin" "$dir/bad.kg" --bind B=2 2>&1); rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q "line 4, column"; then pass; else fail "bad IR (rc=$rc): $out"; fi
out=$("$bin" "$dir/m.kg" "$dir/nope.safetensors" --bind B=2,L=7 2>&1); rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q "cannot open"; then pass; else fail "missing file (rc=$rc): $out"; fi
out=$("$bin" "$dir/m.kg" "$dir/o.safetensors" --bind B=2,L=7 2>&1); rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q "weight 'emb' is missing from the safetensors file"; then pass; else fail "missing weight (rc=$rc): $out"; fi
out=$("$bin" "$dir/m.kg" --random-weights 2>&1); rc=$?
if [ $rc -eq 2 ] && echo "$out" | grep -q "give --bind"; then pass; else fail "unbound (rc=$rc): $out"; fi
out=$("$bin" "$dir/m.kg" --random-weights --bind B=2,Q=3 2>&1); rc=$?
if [ $rc -eq 2 ] && echo "$out" | grep -q "'Q' is not a dim"; then pass; else fail "bad bind (rc=$rc): $out"; fi

echo "[kern_run_check.sh] $ok ok, $failed failed"
[ $failed -eq 0 ]
