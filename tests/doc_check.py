#!/usr/bin/env python3
"""make doc-check (and make test): every ```c block of README.md and
docs/*.md compiles.

A block with a function definition is a whole translation unit and is
compiled as written (so it must include what it uses). Any other block is
a fragment: its leading preprocessor lines stay at file scope, the rest
becomes the body of a function, after <stdio.h>, <stdlib.h>, <string.h>
and "kern.h" (unless the block includes a kern header itself). An HTML
comment right before the fence,

    <!-- doc-check: float *xp, *yp; int64_t T, K; -->

declares what the fragment takes from its surroundings (its lines that
start with '#' go to file scope). A block that is not meant to compile (a
synopsis of declarations, pseudo-code) has the info string `c nocompile`.
Compiled as C11 with -fsyntax-only -Wall -Wextra -Werror (unused
variables allowed). Prints "[doc-check] N ok, M failed".
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CC = os.environ.get("CC", "cc")
FLAGS = ["-std=c11", "-D_GNU_SOURCE", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
         "-Wno-unused-variable", "-Wno-unused-but-set-variable", "-Wno-unused-function",
         "-Iinclude", "-Ikernels", "-Ikernels/cuda", "-Ibuild/include", "-Ibench"]
FUNC_DEF = re.compile(r"^(?!(?:if|for|while|switch|do|else|return)\b)"
                      r"(?:[A-Za-z_][\w \t\*]*\b)?[A-Za-z_]\w*\s*\([^;{]*\)\s*\{|^KBENCH_INIT\(")
KERN_INC = re.compile(r'^\s*#\s*include\s*[<"](?:kern/)?kern[\w]*\.(?:h|cuh)[>"]')


def blocks(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^```c(\s.*)?$", lines[i])
        if not m:
            i += 1
            continue
        info = (m.group(1) or "").split()
        start = i + 1
        j = start
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        prelude = ""
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        if k >= 0 and lines[k].rstrip().endswith("-->"):
            e = k
            while k >= 0 and "<!--" not in lines[k]:
                k -= 1
            text = "\n".join(lines[k:e + 1])
            mm = re.search(r"<!--\s*doc-check:(.*?)-->", text, re.S)
            if mm:
                prelude = mm.group(1)
        yield start, info, "\n".join(lines[start:j]), prelude
        i = j + 1


def source(body, prelude):
    pre_top = [l for l in prelude.split("\n") if l.strip().startswith("#")]
    pre_in = [l for l in prelude.split("\n") if not l.strip().startswith("#")]
    if any(FUNC_DEF.match(l) for l in body.split("\n")):
        return "\n".join(pre_top + [body, ""])
    lines = body.split("\n")
    n = 0  # leading preprocessor lines (and the comments/blank lines among them)
    for idx, l in enumerate(lines):
        s = l.strip()
        if s.startswith("#"):
            n = idx + 1
        elif s and not s.startswith("/*") and not s.startswith("//"):
            break
    top, rest = lines[:n], lines[n:]
    head = ["#include <stdio.h>", "#include <stdlib.h>", "#include <string.h>"]
    if not any(KERN_INC.match(l) for l in top + pre_top):
        head.append('#include "kern.h"')
    return "\n".join(head + pre_top + top + ["void kern_doc_block(void);",
                     "void kern_doc_block(void) {"] + pre_in + rest + ["}", ""])


def main():
    os.chdir(ROOT)
    files = ["README.md"] + sorted(glob.glob("docs/*.md"))
    ok = failed = skipped = 0
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            for line, info, body, prelude in blocks(f):
                if "nocompile" in info:
                    skipped += 1
                    continue
                src = os.path.join(tmp, "block.c")
                with open(src, "w") as out:
                    out.write(source(body, prelude))
                r = subprocess.run([CC] + FLAGS + [src], capture_output=True, text=True)
                if r.returncode == 0:
                    ok += 1
                    print("ok   %s:%d" % (f, line))
                else:
                    failed += 1
                    print("FAIL %s:%d (the ```c block starting there)" % (f, line))
                    print("\n".join(r.stderr.strip().split("\n")[:15]))
    print("doc-check: %d blocks compiled, %d marked nocompile" % (ok + failed, skipped))
    print("[doc-check] %d ok, %d failed" % (ok, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
