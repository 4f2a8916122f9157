#!/usr/bin/env python3
"""kern_tmpl.py - expands per-ISA templates into marked regions of headers.

A template (gen/templates/NAME.c.in) is C written once against a small
vector vocabulary (docs/gen.md): the types VF / VI / VM, the width VW, the
function suffix __ISA, the attribute V_TARGET and operations V_ADD(a, b),
V_FMA(a, b, c), V_LUT8(tab, k), ... Each header region

    /* BEGIN GENERATED kern_tmpl.py: NAME isa=scalar,avx2,avx512,neon — do not edit */
    ...
    /* END GENERATED */

is replaced by the template expanded once per listed ISA, the x86 ones
inside `#ifdef KERN_X86`, NEON inside `#ifdef KERN_NEON`, scalar bare.

    python3 gen/kern_tmpl.py            rewrite every region (files change
                                        only when their text changes)
    python3 gen/kern_tmpl.py --check    exit 1 naming each region whose
                                        text differs from its template
    python3 gen/kern_tmpl.py FILE...    only these headers

Python 3 standard library only; the output depends only on the templates
(no time stamps, no paths), so it is deterministic.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATES = os.path.join(ROOT, "gen", "templates")
DEFAULT_FILES = ["include", "kernels"]

BEGIN_RE = re.compile(
    r"^/\* BEGIN GENERATED kern_tmpl\.py: (?P<name>[A-Za-z0-9_]+)"
    r"(?P<params>(?: [a-z_]+=[A-Za-z0-9_,]+)*) \u2014 do not edit \*/$")
END_LINE = "/* END GENERATED */"

ISAS = ("scalar", "avx2", "avx512", "neon")
GUARD = {"scalar": None, "avx2": "KERN_X86", "avx512": "KERN_X86", "neon": "KERN_NEON"}

# --------------------------------------------------------------- vocabulary
# Each ISA: types, width, target attribute and the operations. An operation
# is a format string over its arguments {0}, {1}, ...; arguments are
# expanded first. Operations whose expansion repeats an argument go through
# a helper function (kern__s_*, kern__*__neon in kern_base.h) instead, so
# no argument is evaluated twice.

COMMON_SCALAR = {
    "V_ADD": "(({0}) + ({1}))",
    "V_SUB": "(({0}) - ({1}))",
    "V_MUL": "kern__s_mul({0}, {1})",
    "V_DIV": "(({0}) / ({1}))",
    "V_FMA": "kern__s_fma({0}, {1}, {2})",
    "V_FNMA": "kern__s_fma(-({0}), {1}, {2})",
    "V_FMS": "kern__s_fma({0}, {1}, -({2}))",
    "V_SQRT": "kern__s_sqrt({0})",
    "V_MIN": "kern__s_min({0}, {1})",
    "V_MAX": "kern__s_max({0}, {1})",
    "V_ABS": "kern__s_abs({0})",
    "V_NEG": "(-({0}))",
    "V_ANDF": "kern__s_andf({0}, {1})",
    "V_ORF": "kern__s_orf({0}, {1})",
    "V_XORF": "kern__s_xorf({0}, {1})",
    "V_SET1": "({0})",
    "V_ZERO": "0.0f",
    "V_LT": "(({0}) < ({1}))",
    "V_LE": "(({0}) <= ({1}))",
    "V_GT": "(({0}) > ({1}))",
    "V_GE": "(({0}) >= ({1}))",
    "V_EQ": "(({0}) == ({1}))",
    "V_SEL": "(({0}) ? ({1}) : ({2}))",
    "V_MAND": "(({0}) & ({1}))",
    "V_MOR": "(({0}) | ({1}))",
    "V_MNOT": "(!({0}))",
    "V_ANY": "({0})",
    "V_ALL": "({0})",
    "V_MCOUNT": "({0})",
    "V_HMAX": "({0})",
    "V_STOREB": "(*(uint8_t *)({0}) = (uint8_t)({1}))",
    "V_BITS": "((int32_t)kern__f32_bits({0}))",
    "V_FLOAT": "kern__bits_f32((uint32_t)({0}))",
    "V_IADD": "kern__s_iadd({0}, {1})",
    "V_ISUB": "kern__s_isub({0}, {1})",
    "V_IAND": "(({0}) & ({1}))",
    "V_ISHL": "kern__s_ishl({0}, {1})",
    "V_ISRL": "kern__s_isrl({0}, {1})",
    "V_ISRA": "kern__s_isra({0}, {1})",
    "V_ISET1": "((int32_t)({0}))",
    "V_CVTT": "kern__s_cvtt({0})",
    "V_CVTN": "kern__s_cvtn({0})",
    "V_CVTIF": "((float)({0}))",
    "V_LUT8": "(({0})[({1}) & 7])",
    "V_LOAD": "(*(const float *)({0}))",
    "V_STORE": "(*(float *)({0}) = ({1}))",
    "V_LOADN": "(*(const float *)({0}))",
    "V_STOREN": "(*(float *)({0}) = ({1}))",
    "V_ILOAD": "(*(const int32_t *)({0}))",
    "V_ILOADN": "(*(const int32_t *)({0}))",
}

AVX2 = {
    "V_ADD": "_mm256_add_ps({0}, {1})",
    "V_SUB": "_mm256_sub_ps({0}, {1})",
    "V_MUL": "kern__mul__avx2({0}, {1})",
    "V_DIV": "_mm256_div_ps({0}, {1})",
    "V_FMA": "_mm256_fmadd_ps({0}, {1}, {2})",
    "V_FNMA": "_mm256_fnmadd_ps({0}, {1}, {2})",
    "V_FMS": "_mm256_fmsub_ps({0}, {1}, {2})",
    "V_SQRT": "_mm256_sqrt_ps({0})",
    "V_MIN": "_mm256_min_ps({0}, {1})",
    "V_MAX": "_mm256_max_ps({0}, {1})",
    "V_ABS": "_mm256_andnot_ps(_mm256_set1_ps(-0.0f), {0})",
    "V_NEG": "_mm256_xor_ps(_mm256_set1_ps(-0.0f), {0})",
    "V_ANDF": "_mm256_and_ps({0}, {1})",
    "V_ORF": "_mm256_or_ps({0}, {1})",
    "V_XORF": "_mm256_xor_ps({0}, {1})",
    "V_SET1": "_mm256_set1_ps({0})",
    "V_ZERO": "_mm256_setzero_ps()",
    "V_LT": "_mm256_cmp_ps({0}, {1}, _CMP_LT_OQ)",
    "V_LE": "_mm256_cmp_ps({0}, {1}, _CMP_LE_OQ)",
    "V_GT": "_mm256_cmp_ps({0}, {1}, _CMP_GT_OQ)",
    "V_GE": "_mm256_cmp_ps({0}, {1}, _CMP_GE_OQ)",
    "V_EQ": "_mm256_cmp_ps({0}, {1}, _CMP_EQ_OQ)",
    "V_SEL": "_mm256_blendv_ps({2}, {1}, {0})",
    "V_MAND": "_mm256_and_ps({0}, {1})",
    "V_MOR": "_mm256_or_ps({0}, {1})",
    "V_MNOT": "_mm256_xor_ps(_mm256_castsi256_ps(_mm256_set1_epi32(-1)), {0})",
    "V_ANY": "(_mm256_movemask_ps({0}) != 0)",
    "V_ALL": "(_mm256_movemask_ps({0}) == 0xff)",
    "V_MCOUNT": "__builtin_popcount((unsigned)_mm256_movemask_ps({0}))",
    "V_HMAX": "kern__hmax__avx2({0})",
    "V_STOREB": "kern__storeb__avx2({0}, {1}, {2})",
    "V_BITS": "_mm256_castps_si256({0})",
    "V_FLOAT": "_mm256_castsi256_ps({0})",
    "V_IADD": "_mm256_add_epi32({0}, {1})",
    "V_ISUB": "_mm256_sub_epi32({0}, {1})",
    "V_IAND": "_mm256_and_si256({0}, {1})",
    "V_ISHL": "_mm256_slli_epi32({0}, {1})",
    "V_ISRL": "_mm256_srli_epi32({0}, {1})",
    "V_ISRA": "_mm256_srai_epi32({0}, {1})",
    "V_ISET1": "_mm256_set1_epi32({0})",
    "V_CVTT": "_mm256_cvttps_epi32({0})",
    "V_CVTN": "_mm256_cvtps_epi32({0})",
    "V_CVTIF": "_mm256_cvtepi32_ps({0})",
    "V_LUT8": "_mm256_permutevar8x32_ps(_mm256_loadu_ps({0}), {1})",
    "V_LOAD": "_mm256_loadu_ps({0})",
    "V_STORE": "_mm256_storeu_ps({0}, {1})",
    "V_LOADN": "kern__loadn__avx2({0}, {1})",
    "V_STOREN": "kern__storen__avx2({0}, {1}, {2})",
    "V_ILOAD": "_mm256_loadu_si256((const __m256i *)(const void *)({0}))",
    "V_ILOADN": "_mm256_maskload_epi32((const int *)(const void *)({0}), kern__tailmask__avx2({1}))",
}

AVX512 = {
    "V_ADD": "_mm512_add_ps({0}, {1})",
    "V_SUB": "_mm512_sub_ps({0}, {1})",
    "V_MUL": "kern__mul__avx512({0}, {1})",
    "V_DIV": "_mm512_div_ps({0}, {1})",
    "V_FMA": "_mm512_fmadd_ps({0}, {1}, {2})",
    "V_FNMA": "_mm512_fnmadd_ps({0}, {1}, {2})",
    "V_FMS": "_mm512_fmsub_ps({0}, {1}, {2})",
    "V_SQRT": "_mm512_sqrt_ps({0})",
    "V_MIN": "_mm512_min_ps({0}, {1})",
    "V_MAX": "_mm512_max_ps({0}, {1})",
    "V_ABS": "_mm512_abs_ps({0})",
    "V_NEG": "_mm512_xor_ps(_mm512_set1_ps(-0.0f), {0})",
    "V_ANDF": "_mm512_and_ps({0}, {1})",
    "V_ORF": "_mm512_or_ps({0}, {1})",
    "V_XORF": "_mm512_xor_ps({0}, {1})",
    "V_SET1": "_mm512_set1_ps({0})",
    "V_ZERO": "_mm512_setzero_ps()",
    "V_LT": "_mm512_cmp_ps_mask({0}, {1}, _CMP_LT_OQ)",
    "V_LE": "_mm512_cmp_ps_mask({0}, {1}, _CMP_LE_OQ)",
    "V_GT": "_mm512_cmp_ps_mask({0}, {1}, _CMP_GT_OQ)",
    "V_GE": "_mm512_cmp_ps_mask({0}, {1}, _CMP_GE_OQ)",
    "V_EQ": "_mm512_cmp_ps_mask({0}, {1}, _CMP_EQ_OQ)",
    "V_SEL": "_mm512_mask_blend_ps({0}, {2}, {1})",
    "V_MAND": "((__mmask16)(({0}) & ({1})))",
    "V_MOR": "((__mmask16)(({0}) | ({1})))",
    "V_MNOT": "((__mmask16)~({0}))",
    "V_ANY": "(({0}) != 0)",
    "V_ALL": "(({0}) == 0xffff)",
    "V_MCOUNT": "__builtin_popcount((unsigned){0})",
    "V_HMAX": "_mm512_reduce_max_ps({0})",
    "V_STOREB": "kern__storeb__avx512({0}, {1}, {2})",
    "V_BITS": "_mm512_castps_si512({0})",
    "V_FLOAT": "_mm512_castsi512_ps({0})",
    "V_IADD": "_mm512_add_epi32({0}, {1})",
    "V_ISUB": "_mm512_sub_epi32({0}, {1})",
    "V_IAND": "_mm512_and_si512({0}, {1})",
    "V_ISHL": "_mm512_slli_epi32({0}, {1})",
    "V_ISRL": "_mm512_srli_epi32({0}, {1})",
    "V_ISRA": "_mm512_srai_epi32({0}, {1})",
    "V_ISET1": "_mm512_set1_epi32({0})",
    "V_CVTT": "_mm512_cvttps_epi32({0})",
    "V_CVTN": "_mm512_cvtps_epi32({0})",
    "V_CVTIF": "_mm512_cvtepi32_ps({0})",
    # the 8 entries in the low half, the index masked to 3 bits: the mask
    # is shared by a polynomial's lookups, where a broadcast table was
    # re-broadcast (a port 5 shuffle) before every one of them
    "V_LUT8": "_mm512_permutexvar_ps(_mm512_and_si512({1}, _mm512_set1_epi32(7)), "
              "_mm512_castps256_ps512(_mm256_loadu_ps({0})))",
    "V_LOAD": "_mm512_loadu_ps({0})",
    "V_STORE": "_mm512_storeu_ps({0}, {1})",
    "V_LOADN": "kern__loadn__avx512({0}, {1})",
    "V_STOREN": "kern__storen__avx512({0}, {1}, {2})",
    "V_ILOAD": "_mm512_loadu_si512((const void *)({0}))",
    "V_ILOADN": "_mm512_maskz_loadu_epi32(kern__tailmask__avx512({1}), (const void *)({0}))",
}

NEON = {
    "V_ADD": "vaddq_f32({0}, {1})",
    "V_SUB": "vsubq_f32({0}, {1})",
    "V_MUL": "kern__mul__neon({0}, {1})",
    "V_DIV": "vdivq_f32({0}, {1})",
    "V_FMA": "vfmaq_f32({2}, {0}, {1})",
    "V_FNMA": "vfmsq_f32({2}, {0}, {1})",
    "V_FMS": "vnegq_f32(vfmsq_f32({2}, {0}, {1}))",
    "V_SQRT": "vsqrtq_f32({0})",
    "V_MIN": "kern__min__neon({0}, {1})",
    "V_MAX": "kern__max__neon({0}, {1})",
    "V_ABS": "vabsq_f32({0})",
    "V_NEG": "vnegq_f32({0})",
    "V_ANDF": "vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32({0}), vreinterpretq_u32_f32({1})))",
    "V_ORF": "vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32({0}), vreinterpretq_u32_f32({1})))",
    "V_XORF": "vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32({0}), vreinterpretq_u32_f32({1})))",
    "V_SET1": "vdupq_n_f32({0})",
    "V_ZERO": "vdupq_n_f32(0.0f)",
    "V_LT": "vcltq_f32({0}, {1})",
    "V_LE": "vcleq_f32({0}, {1})",
    "V_GT": "vcgtq_f32({0}, {1})",
    "V_GE": "vcgeq_f32({0}, {1})",
    "V_EQ": "vceqq_f32({0}, {1})",
    "V_SEL": "vbslq_f32({0}, {1}, {2})",
    "V_MAND": "vandq_u32({0}, {1})",
    "V_MOR": "vorrq_u32({0}, {1})",
    "V_MNOT": "vmvnq_u32({0})",
    "V_ANY": "(vmaxvq_u32({0}) != 0)",
    "V_ALL": "(vminvq_u32({0}) != 0)",
    "V_MCOUNT": "((int)vaddvq_u32(vshrq_n_u32({0}, 31)))",
    "V_HMAX": "vmaxvq_f32({0})",
    "V_STOREB": "kern__storeb__neon({0}, {1}, {2})",
    "V_BITS": "vreinterpretq_s32_f32({0})",
    "V_FLOAT": "vreinterpretq_f32_s32({0})",
    "V_IADD": "vaddq_s32({0}, {1})",
    "V_ISUB": "vsubq_s32({0}, {1})",
    "V_IAND": "vandq_s32({0}, {1})",
    "V_ISHL": "vshlq_n_s32({0}, {1})",
    "V_ISRL": "vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_s32({0}), {1}))",
    "V_ISRA": "vshrq_n_s32({0}, {1})",
    "V_ISET1": "vdupq_n_s32({0})",
    "V_CVTT": "vcvtq_s32_f32({0})",
    "V_CVTN": "vcvtnq_s32_f32({0})",
    "V_CVTIF": "vcvtq_f32_s32({0})",
    "V_LUT8": "kern__lut8__neon({0}, {1})",
    "V_LOAD": "vld1q_f32({0})",
    "V_STORE": "vst1q_f32({0}, {1})",
    "V_LOADN": "kern__loadn__neon({0}, {1})",
    "V_STOREN": "kern__storen__neon({0}, {1}, {2})",
    "V_ILOAD": "vld1q_s32((const int32_t *)(const void *)({0}))",
    "V_ILOADN": "vreinterpretq_s32_f32(kern__loadn__neon((const float *)(const void *)({0}), {1}))",
}

VOCAB = {
    "scalar": dict(ops=COMMON_SCALAR, VF="float", VI="int32_t", VM="int", VW="1",
                   target="", suffix=None),
    "avx2": dict(ops=AVX2, VF="__m256", VI="__m256i", VM="__m256", VW="8",
                 target="KERN_TARGET_AVX2", suffix="__avx2"),
    "avx512": dict(ops=AVX512, VF="__m512", VI="__m512i", VM="__mmask16", VW="16",
                   target="KERN_TARGET_AVX512", suffix="__avx512"),
    "neon": dict(ops=NEON, VF="float32x4_t", VI="int32x4_t", VM="uint32x4_t", VW="4",
                 target="", suffix="__neon"),
}
for _v in VOCAB.values():  # every ISA implements the whole vocabulary
    assert set(_v["ops"]) == set(COMMON_SCALAR), sorted(set(COMMON_SCALAR) ^ set(_v["ops"]))


class TmplError(Exception):
    pass


def split_args(s, i, where):
    """s[i] == '('; returns (args, index after the closing paren)."""
    depth, args, cur = 0, [], []
    j = i
    while j < len(s):
        c = s[j]
        if c == "(":
            depth += 1
            if depth > 1:
                cur.append(c)
        elif c == ")":
            depth -= 1
            if depth == 0:
                args.append("".join(cur).strip())
                return args, j + 1
            cur.append(c)
        elif c == "," and depth == 1:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        j += 1
    raise TmplError("%s: unbalanced parentheses" % where)


OP_RE = re.compile(r"\bV_[A-Z0-9_]+\b")


def expand_ops(s, ops, where):
    out, i = [], 0
    while True:
        m = OP_RE.search(s, i)
        if not m:
            out.append(s[i:])
            return "".join(out)
        name = m.group(0)
        out.append(s[i:m.start()])
        if name == "V_TARGET":
            out.append(name)
            i = m.end()
            continue
        if name not in ops:
            raise TmplError("%s: unknown operation %s" % (where, name))
        j = m.end()
        while j < len(s) and s[j] in " \t":
            j += 1
        if j >= len(s) or s[j] != "(":
            raise TmplError("%s: %s without arguments" % (where, name))
        args, k = split_args(s, j, where)
        if args == [""]:
            args = []
        args = [expand_ops(a, ops, where) for a in args]
        try:
            out.append(ops[name].format(*args))
        except IndexError:
            raise TmplError("%s: %s given %d arguments" % (where, name, len(args)))
        i = k


def select_lines(lines, isa, where):
    """Applies @if/@elif/@else/@endif (lists of ISAs) and drops @# lines."""
    out, stack = [], []  # stack of [taking, taken_before]
    for n, line in enumerate(lines, 1):
        st = line.strip()
        if st.startswith("@#"):
            continue
        if st.startswith("@"):
            word, _, rest = st.partition(" ")
            names = [x.strip() for x in rest.split(",") if x.strip()]
            for x in names:
                if x not in ISAS:
                    raise TmplError("%s:%d: unknown ISA %s" % (where, n, x))
            if word == "@if":
                parent = all(s[0] for s in stack)
                hit = parent and isa in names
                stack.append([hit, hit])
            elif word == "@elif":
                if not stack:
                    raise TmplError("%s:%d: @elif without @if" % (where, n))
                top = stack[-1]
                parent = all(s[0] for s in stack[:-1])
                top[0] = parent and not top[1] and isa in names
                top[1] = top[1] or top[0]
            elif word == "@else":
                if not stack:
                    raise TmplError("%s:%d: @else without @if" % (where, n))
                top = stack[-1]
                parent = all(s[0] for s in stack[:-1])
                top[0] = parent and not top[1]
                top[1] = True
            elif word == "@endif":
                if not stack:
                    raise TmplError("%s:%d: @endif without @if" % (where, n))
                stack.pop()
            else:
                raise TmplError("%s:%d: unknown directive %s" % (where, n, word))
            continue
        if all(s[0] for s in stack):
            out.append(line)
    if stack:
        raise TmplError("%s: @if without @endif" % where)
    return out


def expand_isa(text, isa, where):
    v = VOCAB[isa]
    lines = select_lines(text.split("\n"), isa, where)
    s = "\n".join(lines)
    s = expand_ops(s, v["ops"], where)
    if v["suffix"] is None:  # scalar twin: kern__v_NAME__ISA -> kern__s_NAME
        s = re.sub(r"\bkern__v_(\w+?)__ISA\b", r"kern__s_\1", s)
        if "__ISA" in s:
            raise TmplError("%s: __ISA in a name the scalar twin cannot rename "
                            "(use kern__v_NAME__ISA)" % where)
    else:
        s = s.replace("__ISA", v["suffix"])
    for tok in ("VF", "VI", "VM", "VW"):
        s = re.sub(r"\b%s\b" % tok, v[tok], s)
    s = re.sub(r"\bV_TARGET\b ?", (v["target"] + " ") if v["target"] else "", s)
    s = s.replace("ISA_NAME", '"%s"' % isa)
    return s.rstrip("\n") + "\n"


def expand(name, params, where):
    path = os.path.join(TEMPLATES, name + ".c.in")
    if not os.path.exists(path):
        raise TmplError("%s: no template gen/templates/%s.c.in" % (where, name))
    with open(path, encoding="utf-8") as f:
        text = f.read()
    isas = params.get("isa", ",".join(ISAS)).split(",")
    for isa in isas:
        if isa not in ISAS:
            raise TmplError("%s: unknown ISA %s" % (where, isa))
    out, guard = [], None
    for isa in isas:
        g = GUARD[isa]
        if g != guard:
            if guard:
                out.append("#endif /* %s */\n" % guard)
            if g:
                out.append("#ifdef %s\n" % g)
            guard = g
        out.append("/* ---- %s ---- */\n" % isa)
        out.append(expand_isa(text, isa, "gen/templates/%s.c.in [%s]" % (name, isa)))
    if guard:
        out.append("#endif /* %s */\n" % guard)
    return "".join(out)


def process(path, check):
    """Returns (new_text, list of (line, name) regions that differ)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    lines = text.split("\n")
    out, stale, i = [], [], 0
    rel = os.path.relpath(path, ROOT)
    while i < len(lines):
        line = lines[i]
        m = BEGIN_RE.match(line)
        if not m:
            if line.startswith("/* BEGIN GENERATED"):
                raise TmplError("%s:%d: malformed BEGIN GENERATED marker" % (rel, i + 1))
            out.append(line)
            i += 1
            continue
        start = i
        params = dict(p.split("=", 1) for p in m.group("params").split())
        j = i + 1
        while j < len(lines) and lines[j] != END_LINE:
            if BEGIN_RE.match(lines[j]):
                raise TmplError("%s:%d: BEGIN inside a generated region" % (rel, j + 1))
            j += 1
        if j >= len(lines):
            raise TmplError("%s:%d: BEGIN GENERATED without END GENERATED" % (rel, i + 1))
        old = "\n".join(lines[i + 1:j]) + "\n" if j > i + 1 else ""
        new = expand(m.group("name"), params, "%s:%d" % (rel, start + 1))
        if old != new:
            stale.append((start + 1, m.group("name")))
        out.append(line)
        out.append(new.rstrip("\n"))
        out.append(END_LINE)
        i = j + 1
    return "\n".join(out), stale


def main(argv):
    check = "--check" in argv
    files = [a for a in argv if not a.startswith("--")]
    if not files:
        for d in DEFAULT_FILES:
            dd = os.path.join(ROOT, d)
            for fn in sorted(os.listdir(dd)):
                if fn.endswith(".h"):
                    files.append(os.path.join(dd, fn))
    bad = 0
    try:
        for path in files:
            new, stale = process(path, check)
            rel = os.path.relpath(path, ROOT)
            for line, name in stale:
                if check:
                    print("%s:%d: generated region '%s' differs from gen/templates/%s.c.in "
                          "(edited by hand or stale; run make gen)" % (rel, line, name, name))
                bad += 1
            if stale and not check:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(new)
                print("kern_tmpl: rewrote %s (%d region%s)" % (rel, len(stale), "" if len(stale) == 1 else "s"))
    except TmplError as e:
        print("kern_tmpl: error: %s" % e, file=sys.stderr)
        return 2
    if check and bad:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
