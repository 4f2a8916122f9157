#!/usr/bin/env bash
# make gen-compile-check: each generated header given (build/gen/NAME.h)
# builds warning-free with -Wall -Wextra -Werror -pedantic as C99 and C11
# (gcc, clang) and C++17 (g++, clang++), declarations alone and with its
# NAME_IMPLEMENTATION (-fsyntax-only: the front end is what differs
# between the languages; the optimised builds are make test's). JOBS
# (default 2) compilations run at once.
set -u
if [ "${1:-}" = "--one" ]; then # worker: --one NAME CC STD [-DNAME_IMPLEMENTATION]
  h=$2; c=$3; s=$4; impl=${5:-}
  case $c in *++) l="-x c++";; *) l="-x c";; esac
  echo "#include \"$h.h\"" | $c $l -std=$s -Wall -Wextra -Werror -pedantic -D_GNU_SOURCE \
    $impl -Iinclude -Ikernels -Ibuild/gen -fsyntax-only - || { echo "FAIL build/gen/$h.h ($c -std=$s $impl)"; exit 1; }
  exit 0
fi
jobs=""
for h in "$@"; do
  U=$(echo "$h" | tr a-z A-Z)
  for cc in gcc:c99 gcc:c11 clang:c99 clang:c11 g++:c++17 clang++:c++17; do
    c=${cc%%:*}
    command -v "$c" >/dev/null || { echo "gen-compile-check: $c not installed"; continue; }
    jobs="$jobs$h $c ${cc##*:}"$'\n'"$h $c ${cc##*:} -D${U}_IMPLEMENTATION"$'\n'
  done
done
out=$(printf '%s' "$jobs" | xargs -P "${JOBS:-2}" -L 1 "$0" --one)
rc=$?
[ -n "$out" ] && printf '%s\n' "$out"
[ $rc -eq 0 ] && ! printf '%s' "$out" | grep -q '^FAIL ' && { echo "gen-compile-check: ok"; exit 0; }
exit 1
