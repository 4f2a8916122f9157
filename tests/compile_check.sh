#!/usr/bin/env bash
# make compile-check: kern builds warning-free, as documented, with -Wall
# -Wextra -Werror -pedantic:
#   decl    every public header alone, declarations only, and dist/kern.h:
#           C99, C11 (gcc, clang), C++17 (g++, clang++); no -O (the
#           front end is all a declaration exercises).
#   impl    every header alone with its implementation, the same six
#           compilers, -O0, up to the code generator (gcc: GIMPLE only,
#           clang: IR only; every -O0 warning, a third of the time).
#   opt     the whole implementation (kern.h) at -O2, -O3 and -O2
#           -march=native, as C11 and C++17 with gcc and clang: the middle
#           end's warnings (uninitialized, array bounds, ...) arise here.
#   use     const-friendly views and every params struct / plain struct
#           zero-initialised as the docs say: `= {0}` in C, `{}` in C++.
#   static  two KERN_STATIC translation units linked together.
# Arguments: check only these headers (decl and impl). JOBS (default 2)
# compilations run at once. Prints the seconds it took.
# CC_CHECK=ci (what .ci/run uses): opt keeps two of the twelve
# whole-implementation builds (gcc -O3 C11 and g++ -O2 C++17: gcc's middle
# end is where the optimised builds add warnings; each costs several test
# compiles, and at -O3 gcc inlines the generated kernels into very large
# functions; clang's warnings come from its front end, which impl runs on
# the whole library as C11 and C++17) and impl three of the six compilers
# (gcc C99, clang C11, clang++ C++17) and static runs with gcc only; decl
# and use are unchanged.
set -u
if [ "${1:-}" = "--one" ]; then # worker: --one SOURCE TAG CC STD OPT
  src=$2; tag=build/cc/$3; cc=$4; std=$5; opt=$6
  case $opt in O0) o="";; O2native) o="-O2 -march=native";; *) o="-$opt";; esac
  case $cc in *++) lang="-x c++";; *) lang="";; esac
  out="-c -o $tag.o"
  if [ "$opt" = O0 ]; then
    # everything that warns at -O0 but no machine code, which is most of
    # an -O0 compile's time (3x): gcc writes only its GIMPLE (an LTO object
    # without the fat part: the front end, the gimplifier and the early
    # passes, where -Wreturn-type, -Wimplicit-fallthrough, -Wunused-function
    # and the always_inline target checks arise, have run); clang stops
    # after IR generation (its warnings are the front end's, and IR
    # generation checks the target features of inlined intrinsics)
    case $cc in clang*) out="-S -emit-llvm -o /dev/null";; *) out="-c -flto -fno-fat-lto-objects -o $tag.o";; esac
  fi
  if ! $cc $lang -std=$std $o -Wall -Wextra -Werror -pedantic -D_GNU_SOURCE -Iinclude -Ikernels -Idist \
       $out "$src" 2> "$tag.err"; then
    echo "FAIL $src ($cc -std=$std $o)"; head -20 "$tag.err"; exit 1
  fi
  exit 0
fi
t0=$(date +%s)
mkdir -p build/cc
if [ $# -gt 0 ]; then headers="$*"; else headers="$(ls include/*.h kernels/*.h) dist/kern.h"; fi
make -s dist/kern.h >/dev/null || exit 1
compilers="gcc:c99 gcc:c11 clang:c99 clang:c11 g++:c++17 clang++:c++17"
impl_compilers=$compilers
opt_jobs="O2:gcc:c11 O2:g++:c++17 O2:clang:c11 O2:clang++:c++17 O3:gcc:c11 O3:g++:c++17 O3:clang:c11 O3:clang++:c++17 O2native:gcc:c11 O2native:g++:c++17 O2native:clang:c11 O2native:clang++:c++17"
if [ "${CC_CHECK:-}" = ci ]; then
  impl_compilers="gcc:c99 clang:c11 clang++:c++17"
  opt_jobs="O3:gcc:c11 O2:g++:c++17"
fi
jobs=build/cc/jobs.txt
: > $jobs
# the optimised builds first: they are the longest
printf '#define KERN_IMPLEMENTATION\n#include "kern.h"\nint kern_cc_dummy_all(void);\nint kern_cc_dummy_all(void) { return 0; }\n' > build/cc/all_impl.c
if [ $# -eq 0 ]; then
  for j in $opt_jobs; do
    opt=${j%%:*}; cm=${j#*:}
    echo "build/cc/all_impl.c all_${opt}_${cm%%:*} ${cm%%:*} ${cm##*:} $opt" >> $jobs
  done
fi
for h in $headers; do
  name=$(basename "$h" .h)
  for mode in impl decl; do
    # dist/kern.h's and kern.h's implementation is kern_graph.h's (which
    # includes every family), checked below and in the optimised builds
    [ "$h" = dist/kern.h ] && [ $mode = impl ] && continue
    [ "$h" = include/kern.h ] && [ $mode = impl ] && continue
    src=build/cc/${name}_${mode}.c
    if [ $mode = impl ]; then printf '#define KERN_IMPLEMENTATION\n' > $src; else : > $src; fi
    printf '#include "%s"\nint kern_cc_dummy_%s(void);\nint kern_cc_dummy_%s(void) { return 0; }\n' "$(basename $h)" "$name" "$name" >> $src
    cms=$compilers; [ $mode = impl ] && cms=$impl_compilers
    for cm in $cms; do
      echo "$src ${name}_${mode}_${cm%%:*}_${cm##*:} ${cm%%:*} ${cm##*:} O0" >> $jobs
    done
  done
done
# const-friendly views: read-only data wraps without casts, as C and as C++
cat > build/cc/constviews_use.c <<'EOF_CV'
#include "kern.h"
int kern_cc_constviews(void);
int kern_cc_constviews(void) {
    static const float w[24] = {0};
    const void *vp = w;
    const int64_t shape[3] = {2, 3, 4};
    kern_tensor t1 = kern_tensor_1d(w, KERN_F32, 24);
    kern_tensor t2 = kern_tensor_2d(w, KERN_F32, 6, 4);
    kern_tensor t3 = kern_tensor_3d(w, KERN_F32, 2, 3, 4);
    kern_tensor t4 = kern_tensor_4d(vp, KERN_F32, 1, 2, 3, 4);
    kern_tensor t5, t6;
    kern_gemm_params gp;
    kern_status s;
    memset(&gp, 0, sizeof gp);
    s = kern_tensor_init(&t5, w, KERN_F32, 3, shape);
    if (s == KERN_OK) s = kern_tensor_init_strided(&t6, w, KERN_F32, 3, shape, NULL);
    gp.epilogue.bias = &t1;
    gp.epilogue.act = KERN_ACT_GELU;
    return (int)s + t2.ndim + t3.ndim + t4.ndim + (gp.epilogue.bias != NULL);
}
EOF_CV
# every params struct (and the plain structs users fill) zero-initialised
# the documented way: `T v = {0};` in C, `T v{};` in C++ (-Wextra includes
# -Wmissing-field-initializers)
structs=$(grep -ho 'typedef struct kern_[a-z0-9_]*_params\b' include/*.h kernels/*.h | awk '{print $3}')
structs="$structs kern_tensor kern_epilogue kern_allocator kern_csr kern_csr_props"
{ printf '#include "kern.h"\n#ifdef __cplusplus\n#define KERN_CC_ZERO(T, v) T v{}\n#else\n#define KERN_CC_ZERO(T, v) T v = {0}\n#endif\n'
  printf 'int kern_cc_params(void);\nint kern_cc_params(void) {\n    int n = 0;\n'
  i=0; for s in $structs; do i=$((i+1)); printf '    KERN_CC_ZERO(%s, v%d);\n    n += (int)sizeof v%d;\n' "$s" $i $i; done
  printf '    return n;\n}\n'; } > build/cc/params_use.c
for cm in $compilers; do
  echo "build/cc/constviews_use.c constviews_${cm%%:*}_${cm##*:} ${cm%%:*} ${cm##*:} O0" >> $jobs
  echo "build/cc/params_use.c params_${cm%%:*}_${cm##*:} ${cm%%:*} ${cm##*:} O0" >> $jobs
done
n=$(wc -l < $jobs)
fail=$(xargs -P "${JOBS:-2}" -L 1 "$0" --one < $jobs | tee build/cc/log.txt | grep -c '^FAIL ')
grep -v '^$' build/cc/log.txt
# two KERN_STATIC translation units with the whole library, linked together
for i in 1 2; do
  printf '#define KERN_STATIC\n#define KERN_IMPLEMENTATION\n#include "kern.h"\nint kern_tu%d(void);\nint kern_tu%d(void) { return (int)kern_dtype_size(KERN_F32); }\n' $i $i > build/cc/static$i.c
done
printf 'int kern_tu1(void); int kern_tu2(void);\nint main(void) { return kern_tu1() + kern_tu2() == 8 ? 0 : 1; }\n' > build/cc/static_main.c
static_ccs="gcc clang"; [ "${CC_CHECK:-}" = ci ] && static_ccs=gcc
for cc in $static_ccs; do
  n=$((n+1))
  # the two units compile at once (each is the whole library at -O0)
  $cc -std=c11 -Wall -Wextra -Werror -pedantic -D_GNU_SOURCE -Iinclude -Ikernels -c build/cc/static1.c -o build/cc/s1.o &
  p1=$!
  $cc -std=c11 -Wall -Wextra -Werror -pedantic -D_GNU_SOURCE -Iinclude -Ikernels -c build/cc/static2.c -o build/cc/s2.o
  r2=$?
  if wait $p1 && [ $r2 -eq 0 ] &&
     $cc build/cc/static_main.c build/cc/s1.o build/cc/s2.o -o build/cc/static_main -lm -lpthread && build/cc/static_main; then :; else
    echo "FAIL two KERN_STATIC translation units ($cc)"; fail=$((fail+1))
  fi
done
echo "compile-check: $((n-fail)) of $n compilations passed in $(( $(date +%s) - t0 ))s (JOBS=${JOBS:-2}, load $(cut -d' ' -f1 /proc/loadavg))"
[ $fail -eq 0 ]
