#!/usr/bin/env bash
# mk/install.sh install|uninstall — `make install` / `make uninstall`.
# Environment: PREFIX, LIBDIR (default $PREFIX/lib), DESTDIR (staging root,
# prepended to every path written), SOVER.
#
# Installed layout (one scheme; programs write #include <kern/kern.h>):
#   $PREFIX/include/kern/kern.h          umbrella (every family)
#   $PREFIX/include/kern/kern_<x>.h      kern_base.h and one per family
#   $PREFIX/include/kern/kern_all.h      the single file (dist/kern.h)
#   $LIBDIR/libkern.a, libkern.so.$SOVER, libkern.so -> libkern.so.$SOVER
#   $LIBDIR/pkgconfig/kern.pc            header-only (Cflags -I$PREFIX/include)
#   $LIBDIR/pkgconfig/kern-lib.pc        the library (-lkern)
#   $LIBDIR/cmake/kern/kernConfig.cmake, kernConfigVersion.cmake
#   $PREFIX/share/kern/install_manifest.txt   what was written ("f PATH"),
#                                        and the directories created ("d PATH")
# The CUDA headers (and their CPU emulator) are not installed.
set -eu
cd "$(dirname "$0")/.."
mode=${1:?usage: install.sh install|uninstall}
: "${PREFIX:?PREFIX is not set}"
PREFIX=${PREFIX%/}
LIBDIR=${LIBDIR:-$PREFIX/lib}
DESTDIR=${DESTDIR:-}
SOVER=${SOVER:-0}
MANIFEST=$PREFIX/share/kern/install_manifest.txt

if [ "$mode" = uninstall ]; then
  if [ ! -f "$DESTDIR$MANIFEST" ]; then
    echo "uninstall: no $DESTDIR$MANIFEST (nothing installed there by make install, or PREFIX differs)" >&2
    exit 1
  fi
  n=0
  dirs=$(grep '^d ' "$DESTDIR$MANIFEST" | cut -c3- | sort -r || true)
  files=$(grep '^f ' "$DESTDIR$MANIFEST" | cut -c3- || true)
  while IFS= read -r path; do
    [ -n "$path" ] || continue
    rm -f "$DESTDIR$path"; n=$((n+1))
  done <<< "$files"
  for d in $dirs; do rmdir "$DESTDIR$d" 2>/dev/null || true; done
  echo "uninstall: removed $n files from $DESTDIR$PREFIX"
  exit 0
fi
[ "$mode" = install ] || { echo "install.sh: unknown mode $mode" >&2; exit 2; }
for f in build/libkern.a build/libkern.so.$SOVER dist/kern.h; do
  [ -f "$f" ] || { echo "install: $f missing (run make lib amalgamate)" >&2; exit 1; }
done
ver=$(awk '/#define KERN_VERSION_(MAJOR|MINOR|PATCH)/ {printf "%s%s", sep, $3; sep="."}' include/kern_base.h)

# directories created by this or an earlier install, kept for uninstall
declare -a made=()
if [ -f "$DESTDIR$MANIFEST" ]; then
  while read -r kind path; do [ "$kind" = d ] && made+=("$path"); done < "$DESTDIR$MANIFEST"
fi
mkd() { # mkd DIR: create DIR and its missing parents, remembering each
  local d=$1 todo=()
  while [ ! -d "$DESTDIR$d" ]; do todo=("$d" "${todo[@]}"); d=$(dirname "$d"); done
  for d in "${todo[@]}"; do mkdir "$DESTDIR$d"; made+=("$d"); done
}
declare -a files=()
put() { # put SRC DEST_DIR [NAME]
  local dst=$2/${3:-$(basename "$1")}
  mkd "$2"; install -m 644 "$1" "$DESTDIR$dst"; files+=("$dst")
}
inc=$PREFIX/include/kern
for h in include/*.h kernels/*.h; do put "$h" "$inc"; done
put dist/kern.h "$inc" kern_all.h
put build/libkern.a "$LIBDIR"
mkd "$LIBDIR"
install -m 755 build/libkern.so.$SOVER "$DESTDIR$LIBDIR/"; files+=("$LIBDIR/libkern.so.$SOVER")
ln -sfn libkern.so.$SOVER "$DESTDIR$LIBDIR/libkern.so"; files+=("$LIBDIR/libkern.so")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
subst() { sed -e "s|@PREFIX@|$PREFIX|g" -e "s|@LIBDIR@|$LIBDIR|g" -e "s|@VERSION@|$ver|g" \
              -e "s|@SOVER@|$SOVER|g" "$1" > "$tmp/$2"; }
subst kern.pc.in kern.pc;                 put "$tmp/kern.pc" "$LIBDIR/pkgconfig"
subst cmake/kern-lib.pc.in kern-lib.pc;   put "$tmp/kern-lib.pc" "$LIBDIR/pkgconfig"
subst cmake/kernConfig.cmake.in kernConfig.cmake;               put "$tmp/kernConfig.cmake" "$LIBDIR/cmake/kern"
subst cmake/kernConfigVersion.cmake.in kernConfigVersion.cmake; put "$tmp/kernConfigVersion.cmake" "$LIBDIR/cmake/kern"
mkd "$(dirname "$MANIFEST")"
{ for f in "${files[@]}"; do echo "f $f"; done
  [ ${#made[@]} -eq 0 ] || printf '%s\n' "${made[@]}" | sort -u | sed 's/^/d /'
  echo "f $MANIFEST"; } > "$DESTDIR$MANIFEST"
echo "install: kern $ver into $DESTDIR$PREFIX (${#files[@]} files; manifest $MANIFEST)"
