#!/usr/bin/env bash
# Every public header compiles alone, declarations only and with its
# implementation, as C99, C11 (gcc, clang) and C++17 (g++, clang++) with
# -Wall -Wextra -Werror -pedantic; two KERN_STATIC translation units link
# together; dist/kern.h likewise. Arguments: check only these headers.
# JOBS (default 2) compilations run at once.
set -u
if [ "${1:-}" = "--one" ]; then # worker: --one HEADER MODE CC STD
  h=$2; mode=$3; cc=$4; std=$5
  name=$(basename "$h" .h)
  src=build/cc/${name}_${mode}.c
  tag=build/cc/${name}_${mode}_${cc}_${std}
  case $cc in *++) lang="-x c++";; *) lang="";; esac
  if ! $cc $lang -std=$std -Wall -Wextra -Werror -pedantic -D_GNU_SOURCE -Iinclude -Ikernels -Idist \
       -c "$src" -o "$tag.o" 2> "$tag.err"; then
    echo "FAIL $h ($mode, $cc -std=$std)"; head -20 "$tag.err"; exit 1
  fi
  exit 0
fi
mkdir -p build/cc
if [ $# -gt 0 ]; then headers="$*"; else headers="$(ls include/*.h kernels/*.h) dist/kern.h"; fi
make -s dist/kern.h >/dev/null || exit 1
compilers="gcc:c99 gcc:c11 clang:c99 clang:c11 g++:c++17 clang++:c++17"
jobs=build/cc/jobs.txt
: > $jobs
for h in $headers; do
  name=$(basename "$h" .h)
  for mode in decl impl; do
    src=build/cc/${name}_${mode}.c
    if [ $mode = impl ]; then printf '#define KERN_IMPLEMENTATION\n' > $src; else : > $src; fi
    printf '#include "%s"\nint kern_cc_dummy_%s(void);\nint kern_cc_dummy_%s(void) { return 0; }\n' "$(basename $h)" "$name" "$name" >> $src
    for cm in $compilers; do
      echo "$h $mode ${cm%%:*} ${cm##*:}" >> $jobs
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
for cm in $compilers; do echo "constviews use ${cm%%:*} ${cm##*:}" >> $jobs; done
n=$(wc -l < $jobs)
fail=$(xargs -P "${JOBS:-2}" -L 1 "$0" --one < $jobs | tee build/cc/log.txt | grep -c '^FAIL ')
grep -v '^$' build/cc/log.txt
# two KERN_STATIC translation units with the whole library, linked together
for i in 1 2; do
  printf '#define KERN_STATIC\n#define KERN_IMPLEMENTATION\n#include "kern.h"\nint kern_tu%d(void);\nint kern_tu%d(void) { return (int)kern_dtype_size(KERN_F32); }\n' $i $i > build/cc/static$i.c
done
printf 'int kern_tu1(void); int kern_tu2(void);\nint main(void) { return kern_tu1() + kern_tu2() == 8 ? 0 : 1; }\n' > build/cc/static_main.c
for cc in gcc clang; do
  n=$((n+1))
  if $cc -std=c11 -Wall -Wextra -Werror -pedantic -D_GNU_SOURCE -Iinclude -Ikernels -c build/cc/static1.c -o build/cc/s1.o &&
     $cc -std=c11 -Wall -Wextra -Werror -pedantic -D_GNU_SOURCE -Iinclude -Ikernels -c build/cc/static2.c -o build/cc/s2.o &&
     $cc build/cc/static_main.c build/cc/s1.o build/cc/s2.o -o build/cc/static_main -lm -lpthread && build/cc/static_main; then :; else
    echo "FAIL two KERN_STATIC translation units ($cc)"; fail=$((fail+1))
  fi
done
echo "compile-check: $((n-fail)) of $n compilations passed"
[ $fail -eq 0 ]
