#!/usr/bin/env python3
"""kern_gen.py -- ahead-of-time specialization of kern graphs (docs/gen.md).

    kern_gen.py model MODEL.kg --bind B=1,L=16 --name bert -o bert.h
    kern_gen.py gemm --m 16 --n 4096 --k 4096 --dtype f32 -o g.h
    kern_gen.py norm --rows 16 --h 768 --dtype f32 -o n.h

Reads the text IR of kern_graph (docs/graph.md), binds its symbolic dims,
infers every shape, and writes one stb-style header: every shape, stride
and arena offset a constant, one direct kernel call (or a constant-bound
loop) per node. Python 3 standard library only; the output needs only
kern's headers. Bad input: a message naming the problem on stderr, exit
status 2, no output file (the header is written to a temporary name and
renamed).
"""
import argparse
import math
import os
import re
import struct
import sys
import tempfile

FORMAT_VERSION = 1


class GenError(Exception):
    pass


# ------------------------------------------------------------------ dtypes
DTYPES = {
    'f32': ('KERN_F32', 4), 'f16': ('KERN_F16', 2), 'bf16': ('KERN_BF16', 2),
    'i8': ('KERN_I8', 1), 'u8': ('KERN_U8', 1), 'i32': ('KERN_I32', 4),
    'i64': ('KERN_I64', 8), 'bool': ('KERN_BOOL', 1),
}
ACTS = {'none': 'KERN_ACT_NONE', 'gelu': 'KERN_ACT_GELU', 'gelu_tanh': 'KERN_ACT_GELU_TANH',
        'relu': 'KERN_ACT_RELU', 'silu': 'KERN_ACT_SILU'}

# op -> (input slots, optional flags); '' slots = variadic (concat)
OPS = {
    'linear': 'x,weight,bias?,residual?',
    'matmul': 'a,b,bias?,residual?',
    'sdpa': 'q,k,v,mask?,k_lens?',
    'layer_norm': 'x,weight?,bias?,residual?',
    'rms_norm': 'x,weight?,bias?,residual?',
    'add': 'a,b', 'sub': 'a,b', 'mul': 'a,b', 'div': 'a,b',
    'softmax': 'x', 'reduce_mean': 'x', 'reduce_sum': 'x',
    'embedding': 'ids,table',
    'reshape': 'x', 'permute': 'x', 'transpose': 'x', 'slice': 'x', 'split': 'x',
    'expand': 'x', 'concat': '', 'copy': 'x', 'cast': 'x',
    'qlinear': 'x,weight,scales?,bias?,residual?',
    'quantize_per_token': 'x',
    'silu_mul': 'a,b?',
    'rope': 'x,table,offsets?',
    'argmax': 'x',
    'topk': 'x',
    'scatter_reduce': 'self,index,src',
    'spmm_reduce': 'rowptr,col,values?,dense',
    'kv_append': 'k_new,v_new,k_cache,v_cache,k_lens,k_scale?,v_scale?',
    'decode_attention': 'q,k_cache,v_cache,k_lens,k_scale?,v_scale?',
    'sparse24_linear': 'x,weight,bias?,residual?',
    'sdpa_relpos': 'q,k,v,rel_pos_h,rel_pos_w',
}
REDUCES = {'sum': 'KERN_REDUCE_SUM', 'prod': 'KERN_REDUCE_PROD', 'mean': 'KERN_REDUCE_MEAN',
           'amax': 'KERN_REDUCE_AMAX', 'amin': 'KERN_REDUCE_AMIN'}
UNARY = ['gelu', 'gelu_tanh', 'silu', 'relu', 'sigmoid', 'sqrt', 'rsqrt', 'exp', 'tanh',
         'erf', 'neg', 'reciprocal', 'scale', 'pow']
for _u in UNARY:
    OPS[_u] = 'x'
# ops the executor knows that have no generated form yet (none today;
# the reader's message stays for the next op the executor gains)
KNOWN_UNSUPPORTED = set()
ATTRS = {'act', 'alpha', 'out_scale', 'trans_a', 'trans_b', 'eps', 'axis', 'axis2', 'perm',
         'shape', 'sizes', 'start', 'length', 'exponent', 'is_causal', 'causal_bottom_right',
         'enable_gqa', 'scale', 'softcap', 'window', 'reduce', 'include_self', 'dtype',
         'prune', 'interleaved', 'k', 'glu'}
# the attributes each op takes (the executor's kern__gops; the others
# none): another one on a node is refused, as the executor refuses it
# (tests/gen/op_table_check.py keeps this equal to the header's table)
OP_ATTRS = {
    'cast': {'dtype'},
    'concat': {'axis'},
    'decode_attention': {'scale'},
    'expand': {'shape'},
    'layer_norm': {'act', 'eps'},
    'linear': {'act', 'alpha', 'glu', 'out_scale'},
    'matmul': {'act', 'alpha', 'out_scale', 'trans_a', 'trans_b'},
    'permute': {'perm'},
    'pow': {'exponent'},
    'qlinear': {'act', 'glu', 'prune'},
    'reshape': {'shape'},
    'rms_norm': {'act', 'eps'},
    'rope': {'interleaved'},
    'scale': {'alpha'},
    'scatter_reduce': {'axis', 'include_self', 'reduce'},
    'sdpa': {'causal_bottom_right', 'enable_gqa', 'is_causal', 'scale', 'softcap', 'window'},
    'sdpa_relpos': {'scale'},
    'slice': {'axis', 'length', 'start'},
    'sparse24_linear': {'act', 'prune'},
    'split': {'axis', 'sizes'},
    'spmm_reduce': {'reduce'},
    'topk': {'k'},
    'transpose': {'axis', 'axis2'},
}
# the values an integer constant may hold
INT_RANGE = {'i32': (-2.0 ** 31, 2.0 ** 31 - 1), 'i64': (-2.0 ** 63, 2.0 ** 63 - 1), 'i8': (-128.0, 127.0),
             'u8': (0.0, 255.0), 'bool': (0.0, 1.0)}
# the flags (the executor's reader takes exactly 0 or 1)
BOOL_ATTRS = {'trans_a', 'trans_b', 'is_causal', 'causal_bottom_right', 'enable_gqa', 'include_self',
              'prune', 'interleaved', 'glu'}
NAME_RE = re.compile(r'^[A-Za-z0-9_.:/\-]{1,127}$')


def f32(x):
    """x rounded to the nearest float (as the C reader's strtof does: past
    the largest float, an infinity)."""
    try:
        return struct.unpack('<f', struct.pack('<f', x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def c_float(x):
    """An exact C float literal for the f32 value x (C99 / C++17 hex form)."""
    x = f32(x)
    if x != x:
        return '(0.0f / 0.0f)'
    if x in (float('inf'), float('-inf')):
        return '(%s1.0f / 0.0f)' % ('-' if x < 0 else '')
    if x == 0:
        return '-0.0f' if struct.pack('<f', x) != b'\0\0\0\0' else '0.0f'
    return x.hex() + 'f'


# --------------------------------------------------------------- dim exprs
def eval_dim(text, syms, where):
    """Evaluates a canonical dim expression (sum of products of symbols and
    integers: B*L, L+P, 2*L-1) with the bound symbols."""
    t = text.strip(' \t')
    if not t:
        raise GenError('%s: empty dim' % where)
    if ' ' in t or '\t' in t:  # (the executor's reader: spaces around a dim only)
        raise GenError("%s: bad dim expression '%s' (a space inside it)" % (where, text))
    total = 0
    for m in re.finditer(r'([+-]?)([^+-]+)', t):
        sign, term = m.group(1), m.group(2)
        v = 1
        for f in term.split('*'):
            if re.fullmatch(r'\d+', f):
                if int(f) > (1 << 63) - 1:
                    raise GenError("%s: dim value too large in '%s'" % (where, text))
                v *= int(f)
            elif re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', f):
                if f not in syms:
                    raise GenError("%s: symbol '%s' is not declared" % (where, f))
                if syms[f] is None:
                    raise GenError("symbol '%s' is not bound (use --bind %s=N)" % (f, f))
                v *= syms[f]
            else:
                raise GenError("%s: bad dim expression '%s'" % (where, text))
        total += -v if sign == '-' else v
    if ''.join(m.group(0) for m in re.finditer(r'([+-]?)([^+-]+)', t)) != t:
        raise GenError("%s: bad dim expression '%s'" % (where, text))
    return total


def split_top(s):
    """Splits 'a,b' at commas outside brackets."""
    out, depth, cur = [], 0, ''
    for ch in s:
        if ch == '[':
            depth += 1
        elif ch == ']':
            depth -= 1
        if ch == ',' and depth == 0:
            out.append(cur)
            cur = ''
        else:
            cur += ch
    out.append(cur)
    return out


# ---------------------------------------------------------------- IR model
class Val:
    """A value: dtype, concrete shape, strides (elements) and where it lives:
    base = ('in', i) | ('w', i) | ('const', i) | ('buf', id) | ('out', i),
    off = element offset into the base."""

    def __init__(self, name, dtype, shape):
        self.name, self.dtype, self.shape = name, dtype, list(shape)
        n = 1
        for d in self.shape:
            n *= d
        if n * DTYPES[dtype][1] >= 1 << 62:  # (the executor: its sizes overflow)
            raise GenError("'%s' %s %s: %d elements, too large" % (name, dtype, self.shape, n))
        self.stride = contiguous(self.shape)
        self.base, self.off = None, 0
        self.kind = None  # input weight const node

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def esize(self):
        return DTYPES[self.dtype][1]

    def contiguous(self):
        return all(self.stride[i] == s or self.shape[i] == 1
                   for i, s in enumerate(contiguous(self.shape)))


def contiguous(shape):
    st, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        st[i] = acc
        acc *= shape[i]
    return st


class Node:
    def __init__(self, line, outs, op, ins, attrs):
        self.line, self.outs, self.op, self.ins, self.attrs = line, outs, op, ins, attrs


class Graph:
    def __init__(self):
        self.syms = {}          # name -> bound value (None = unbound)
        self.inputs = []        # (name, dtype, dims text list)
        self.weights = []
        self.consts = []        # (name, dtype, dims, values)
        self.merged = []        # (name, dtype, dims, source weights): built at prepare
        self.nodes = []
        self.outputs = []


def parse_shape(s, where):
    s = s.strip()
    if not (s.startswith('[') and s.endswith(']')):
        raise GenError('%s: expected a shape [d0,d1,...], got %r' % (where, s))
    body = s[1:-1].strip()
    return [d.strip() for d in body.split(',')] if body else []


def parse_ir(text, path):
    g = Graph()
    lines = text.replace('\r\n', '\n').split('\n')
    header = None
    defined = set()
    pending = []
    for no, raw in enumerate(lines, 1):
        # whitespace is ' ' and '\t' only, and a line that is not a comment
        # is printable ASCII (the executor's reader, byte for byte)
        line = raw.strip(' \t')
        where = '%s:%d' % (path, no)
        if not line or line.startswith('#'):
            continue
        for col, ch in enumerate(raw, 1):
            if not (' ' <= ch <= '~' or ch == '\t'):
                raise GenError('%s, column %d: unexpected character %r' % (where, col, ch))
        if header is None:
            m = re.fullmatch(r'kern-graph\s+(\S+)', line)
            if not m:
                raise GenError("%s, column 1: expected 'kern-graph 1'" % where)
            if m.group(1) != '1':
                raise GenError('%s: IR version %s is not supported (only 1)' % (where, m.group(1)))
            header = 1
            continue
        word = line.split(None, 1)[0]
        rest = line[len(word):].strip()
        if word == 'dim':
            if not re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', rest):
                raise GenError('%s, column 5: bad symbol name %r' % (where, rest))
            if rest in g.syms:
                raise GenError("%s: symbol '%s' declared twice" % (where, rest))
            g.syms[rest] = None
        elif word in ('input', 'weight'):
            parts = rest.split(None, 2)
            if len(parts) != 3 or parts[1] not in DTYPES:
                raise GenError('%s: expected "%s NAME DTYPE [dims]"' % (where, word))
            name = check_name(parts[0], where, defined)
            shape = parse_shape(parts[2], where)
            if word == 'weight' and any(re.search(r'[A-Za-z_]', d) for d in shape):
                raise GenError('%s: weight shapes are concrete (no symbols): %s' % (where, parts[2]))
            (g.inputs if word == 'input' else g.weights).append((name, parts[1], shape, no))
        elif word == 'const':
            m = re.fullmatch(r'(\S+)\s+(\S+)\s+(\[[^\]]*\])\s*(.*)', rest)
            if not m or m.group(2) not in DTYPES:
                raise GenError('%s: expected "const NAME DTYPE [dims] v0,v1,..."' % where)
            name = check_name(m.group(1), where, defined)
            if re.search(r'[A-Za-z_]', m.group(3)):
                raise GenError('%s: constant shapes are concrete (no symbols): %s' % (where, m.group(3)))
            if re.search(r'[ \t]', m.group(4).strip(' \t')):
                raise GenError("%s: constant values are one word, v0,v1,... with no spaces: %r" % (
                    where, m.group(4)))
            try:
                vals = [float(v) for v in m.group(4).split(',')] if m.group(4).strip() else []
            except ValueError:
                raise GenError('%s: bad constant value in %r' % (where, m.group(4)))
            if m.group(2) in INT_RANGE:  # (kern_graph_const: integers the dtype holds)
                lo, hi = INT_RANGE[m.group(2)]
                for q, x in enumerate(vals):
                    if not (lo <= x < hi + 1) or x != math.floor(x):
                        raise GenError("%s: '%s': value %g (element %d) is not an integer that %s holds" % (
                            where, name, x, q, m.group(2)))
            g.consts.append((name, m.group(2), parse_shape(m.group(3), where), vals, no))
        elif word == 'output':
            g.outputs.append((rest, no))
        else:
            m = re.fullmatch(r'([^=]+?)\s*=\s*([a-z0-9_]+)\(([^)]*)\)\s*(.*)', line)
            if not m:
                raise GenError('%s, column 1: malformed line %r' % (where, line))
            outs = [o.strip() for o in m.group(1).split(',')]
            op = m.group(2)
            if op in KNOWN_UNSUPPORTED:
                raise GenError("%s: op '%s' has no generated form yet (run it with the "
                               "executor)" % (where, op))
            if op not in OPS:
                raise GenError("%s, column %d: unknown op '%s'" % (where, line.find(op) + 1, op))
            ins = [a.strip() for a in m.group(3).split(',')] if m.group(3).strip() else []
            attrs = {}
            for kv in m.group(4).split():
                if '=' not in kv:
                    raise GenError('%s: attribute %r is not key=value' % (where, kv))
                k, v = kv.split('=', 1)
                if k not in ATTRS:
                    raise GenError("%s: unknown attribute '%s'" % (where, k))
                if k not in OP_ATTRS.get(op, ()):
                    raise GenError("%s: attribute '%s' does not apply to op '%s'" % (where, k, op))
                if k in BOOL_ATTRS and v not in ('0', '1'):
                    raise GenError('%s: attribute %s=%s: expected 0 or 1' % (where, k, v))
                attrs[k] = v
            for o in outs:
                check_name(o, where, defined)
            pending.append(Node(no, outs, op, ins, attrs))
    if header is None:
        raise GenError("%s: empty IR (expected 'kern-graph 1')" % path)
    # dependency order (text already in order keeps its order)
    avail = set(n for n, *_ in g.inputs) | set(n for n, *_ in g.weights) | \
        set(c[0] for c in g.consts)
    producer = {}
    for n in pending:
        for o in n.outs:
            producer[o] = n
    while pending:
        progress = False
        rest = []
        for n in pending:
            need = [a for a in n.ins if a != '-' and a not in avail]
            for a in need:
                if a not in producer:
                    raise GenError("%s:%d: '%s' is not defined" % (path, n.line, a))
            if need:
                rest.append(n)
                continue
            g.nodes.append(n)
            avail.update(n.outs)
            progress = True
        if not progress:
            raise GenError('%s: cycle among lines %s' % (
                path, ', '.join(str(n.line) for n in rest)))
        pending = rest
    for o, no in g.outputs:
        if o not in avail:
            raise GenError("%s:%d: output '%s' is not defined" % (path, no, o))
    if not g.outputs:
        raise GenError('%s: the graph has no output' % path)
    return g


def check_name(name, where, defined):
    if not NAME_RE.match(name) or name == '-':
        raise GenError('%s: bad name %r' % (where, name))
    if name in defined:
        raise GenError("%s: '%s' is defined twice" % (where, name))
    defined.add(name)
    return name


def parse_bind(s):
    out = {}
    if not s:
        return out
    for item in s.split(','):
        m = re.fullmatch(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(\d+)\s*', item)
        if not m:
            raise GenError("--bind: expected NAME=INT, got %r" % item)
        out[m.group(1)] = int(m.group(2))
    return out


# ----------------------------------------------------------------- lowering
def reshape_strides(oshape, ostride, nshape):
    """Strides that view (oshape, ostride) as nshape without a copy, or None."""
    od = [(s, t) for s, t in zip(oshape, ostride) if s != 1]
    if any(s == 0 for s in oshape):
        return contiguous(nshape)
    nidx = [i for i, s in enumerate(nshape) if s != 1]
    nd = [nshape[i] for i in nidx]
    ns = [0] * len(nd)
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < len(nd) and oi < len(od):
        npd, opd = nd[ni], od[oi][0]
        while npd != opd:
            if npd < opd:
                npd *= nd[nj]
                nj += 1
            else:
                opd *= od[oj][0]
                oj += 1
        for ok in range(oi, oj - 1):
            if od[ok][1] != od[ok + 1][0] * od[ok + 1][1]:
                return None
        ns[nj - 1] = od[oj - 1][1]
        for nk in range(nj - 1, ni, -1):
            ns[nk - 1] = ns[nk] * nd[nk]
        ni, nj, oi, oj = nj, nj + 1, oj, oj + 1
    out = contiguous(nshape)
    for k, i in enumerate(nidx):
        out[i] = ns[k]
    return out


class Step:
    """One emitted statement group: reads/writes name buffers for lifetimes;
    emit(gen) returns C lines (called after the memory plan)."""

    def __init__(self, node, reads, writes, emit, ws=False):
        self.node, self.reads, self.writes, self.emit = node, reads, writes, emit
        self.ws = ws  # a family call that takes params.workspace (emit() knows G.query)


class Lowering:
    def __init__(self, g, bind, name, specialize_max_m=0, da_decide=None):
        self.g, self.name = g, name
        self.spec_max_m = specialize_max_m
        self.da_decide = da_decide  # --autotune: per decode_attention, the instance's split or 0 (the library)
        self.instances = []     # (M, N, K)
        self.norm_instances = []  # (kind, rows, H, eps)
        self.da_instances = []  # decode_attention instances (emit_decode_attn's keys)
        self.da_split = {}  # their cache rows per task
        self.ipacks = []        # (weight index, instance index)
        self.ipack_of = {}
        self.qpacks = []        # (weight Val, scales Val or None, prune): kern_qweight handles
        self.qpack_of = {}
        self.keep_merged = set()  # merged weights a GEMV reads unpacked
        self.data_scratch = False  # scatter/spmm: scratch sized by the index data
        self.qinstances = []    # (M, N, K): qlinear instances
        self.qipacks = []       # (weight Val, scales Val or None, instance index)
        self.qipack_of = {}
        self.spacks = []        # (weight Val, prune): kern_sparse24 handles
        self.spack_of = {}
        for s in g.syms:
            g.syms[s] = bind.get(s)
        for s in bind:
            if s not in g.syms:
                raise GenError("--bind: '%s' is not a dim of the graph" % s)
        self.vals = {}
        self.bufs = []          # [bytes]
        self.buf_loc = {}       # id -> ('arena', off) | ('out', i)
        self.steps = []
        self.packs = []         # weight index per packed handle
        self.pack_of = {}
        self.outputs = []
        self.inputs = []
        self.weights = []
        self.consts = []
        for i, (n, dt, dims, no) in enumerate(g.inputs):
            v = Val(n, dt, [self.dim(d, '%d' % no) for d in dims])
            v.base, v.kind = ('in', i), 'input'
            self.vals[n] = v
            self.inputs.append(v)
        for i, (n, dt, dims, no) in enumerate(g.weights):
            v = Val(n, dt, [self.dim(d, '%d' % no) for d in dims])
            v.base, v.kind = ('w', i), 'weight'
            self.vals[n] = v
            self.weights.append(v)
        for i, (n, dt, dims, vals, no) in enumerate(g.consts):
            v = Val(n, dt, [self.dim(d, '%d' % no) for d in dims])
            if len(vals) != v.numel():
                raise GenError("line %d: const '%s' has %d values for %d elements" %
                               (no, n, len(vals), v.numel()))
            v.base, v.kind = ('const', i), 'const'
            self.vals[n] = v
            self.consts.append((v, vals))
        self.merged = []        # (Val, source Vals): weights the model concatenates
        for j, (n, dt, dims, srcs) in enumerate(getattr(g, 'merged', [])):
            v = Val(n, dt, [int(d) for d in dims])
            v.base, v.kind = ('mw', j), 'weight'
            self.vals[n] = v
            self.merged.append((v, [self.vals[x] for x in srcs]))
        for n in g.nodes:
            self.lower(n)
        self.finish_outputs()

    def dim(self, text, where):
        d = eval_dim(text, self.g.syms, 'line ' + where)
        if d < 0:
            raise GenError('line %s: dim %s is %d (negative) under this binding' % (where, text, d))
        return d

    def new_buf(self, name, dtype, shape):
        v = Val(name, dtype, shape)
        v.kind = 'node'
        self.bufs.append(max(v.numel() * v.esize(), 1))
        v.base = ('buf', len(self.bufs) - 1)
        return v

    def view(self, x, name, shape, stride, off):
        v = Val(name, x.dtype, shape)
        v.stride, v.base, v.off, v.kind = list(stride), x.base, off, 'view'
        return v

    def err(self, n, msg):
        ins = ', '.join('%s=%s %s' % (a, self.vals[a].shape, self.vals[a].dtype)
                        for a in n.ins if a != '-' and a in self.vals)
        return GenError("line %d: node '%s' (%s; %s): %s" % (n.line, n.outs[0], n.op, ins, msg))

    def add_step(self, n, reads, writes, emit, ws=False):
        self.steps.append(Step(n, [r for r in reads if r is not None], writes, emit, ws))

    # ---- per op
    def lower(self, n):
        slots = OPS[n.op].split(',') if OPS[n.op] else None
        if slots is not None and len(n.ins) > len(slots):
            raise GenError("line %d: node '%s' (%s) takes at most %d inputs" %
                           (n.line, n.outs[0], n.op, len(slots)))
        ins = []
        for k, a in enumerate(n.ins):
            if a == '-':
                if slots is None or not slots[k].endswith('?'):
                    raise GenError("line %d: node '%s' (%s): input %d is required" %
                                   (n.line, n.outs[0], n.op, k))
                ins.append(None)
            else:
                ins.append(self.vals[a])
        if slots is not None:
            for k, s in enumerate(slots):
                if not s.endswith('?') and (k >= len(ins) or ins[k] is None):
                    raise GenError("line %d: node '%s' (%s): input '%s' is missing" %
                                   (n.line, n.outs[0], n.op, s))
            ins += [None] * (len(slots) - len(ins))
        getattr(self, 'op_' + n.op, self.op_unary)(n, ins)

    def iattr(self, n, k, default=0):
        v = n.attrs.get(k)
        if v is None:
            return default
        try:
            return int(v)
        except ValueError:
            raise GenError("line %d: attribute %s=%s is not an integer" % (n.line, k, v))

    def ilist(self, n, k, count=None):
        """Attribute k as comma-separated integers (count of them when
        given), or None when absent."""
        v = n.attrs.get(k)
        if v is None:
            return None
        try:  # every element an integer: "0,2,,1" is refused, as the executor's reader does
            out = [int(p) for p in v.split(',')]
        except ValueError:
            out = None
        if out is None or (count is not None and len(out) != count):
            raise GenError("line %d: attribute %s=%s is not %s" % (
                n.line, k, v, 'a list of integers' if count is None else '%d integers' % count))
        return out

    def fattr(self, n, k, default=0.0):
        v = n.attrs.get(k)
        if v is None:
            return default
        try:
            x = f32(float(v))
        except ValueError:
            x = math.nan
        if not math.isfinite(x):  # (the executor: "... must be finite")
            raise GenError("line %d: attribute %s=%s is not a finite number" % (n.line, k, v))
        return x

    def dattr(self, n, k):
        v = n.attrs.get(k)
        return None if v is None else self.dim(v, '%d' % n.line)

    def listattr(self, n, k):
        v = n.attrs.get(k)
        if v is None:
            return None
        return [(-1 if d.strip() == '-1' else self.dim(d, '%d' % n.line)) for d in v.split(',')]

    def axis(self, n, a, ndim):
        b = a + ndim if a < 0 else a
        if b < 0 or b >= ndim:
            raise self.err(n, 'axis %d is out of range for %d dims' % (a, ndim))
        return b

    def set_out(self, n, i, v):
        v.name = n.outs[i]
        self.vals[n.outs[i]] = v

    def need_float(self, n, *vs):
        for v in vs:
            if v is not None and v.dtype not in ('f32', 'bf16', 'f16'):
                raise self.err(n, "'%s' is %s; this op needs a float dtype" % (v.name, v.dtype))

    def epi_check(self, n, b, r, N, yshape):
        """The epilogue operands of linear, matmul, qlinear and
        sparse24_linear, as the executor checks them (kern__ginf_epilogue):
        bias float [N] (N = the weight's rows), a float residual that
        broadcasts to the output."""
        self.need_float(n, b, r)
        if b is not None and b.shape != [N]:
            raise self.err(n, 'bias must be [%d]' % N)
        if r is not None and bcast_shape(r.shape, yshape) != list(yshape):
            raise self.err(n, 'residual does not broadcast to the output %s' % list(yshape))

    def op_linear(self, n, ins):
        x, w, b, r = ins
        if len(w.shape) != 2 or not x.shape or x.shape[-1] != w.shape[1]:
            raise self.err(n, 'x.shape[-1] must equal weight.shape[1] (weight [N,K])')
        if x.dtype != w.dtype:
            raise self.err(n, 'x and weight must have the same dtype')
        glu = self.iattr(n, 'glu')
        if glu and w.shape[0] % 2:
            raise self.err(n, 'glu needs an even weight.shape[0] (gate and up rows)')
        self.epi_check(n, b, r, w.shape[0], x.shape[:-1] + [w.shape[0] // 2 if glu else w.shape[0]])
        y = self.new_buf(n.outs[0], x.dtype, x.shape[:-1] + [w.shape[0] // 2 if glu else w.shape[0]])
        self.gemm_step(n, x, w, b, r, y, trans_a=0, trans_b=1)

    def op_matmul(self, n, ins):
        a, b, bias, r = ins
        ta, tb = self.iattr(n, 'trans_a'), self.iattr(n, 'trans_b')
        if len(a.shape) < 2 or len(b.shape) < 2:
            raise self.err(n, 'a and b need at least 2 dims')
        m, k = (a.shape[-1], a.shape[-2]) if ta else (a.shape[-2], a.shape[-1])
        k2, nn = (b.shape[-1], b.shape[-2]) if tb else (b.shape[-2], b.shape[-1])
        if k != k2:
            raise self.err(n, 'inner dims differ (%d vs %d)' % (k, k2))
        if a.dtype != b.dtype:
            raise self.err(n, 'a and b must have the same dtype')
        batch = bcast_shape(a.shape[:-2], b.shape[:-2])
        if batch is None:
            raise self.err(n, 'batch dims do not broadcast')
        self.epi_check(n, bias, r, nn, batch + [m, nn])
        y = self.new_buf(n.outs[0], a.dtype, batch + [m, nn])
        self.gemm_step(n, a, b, bias, r, y, trans_a=ta, trans_b=tb)

    def op_qlinear(self, n, ins):
        """int8 dynamic linear (kern_qlinear): x quantized per row at run
        time; the weight packed once at prepare (kern_qweight_pack from
        f32/bf16, or kern_qweight_pack_int8 from i8 codes and f32 scales),
        the handle in m->qw[]. The executor's checks (kern__ginfer_qlinear)."""
        x, w, sc, b, r = ins
        if x.dtype not in ('f32', 'bf16'):
            raise self.err(n, 'x must be f32 or bf16')
        if w.dtype == 'i8':
            if sc is None or sc.dtype != 'f32' or len(sc.shape) != 1 or len(w.shape) != 2 or \
                    sc.shape[0] != w.shape[0]:
                raise self.err(n, 'an i8 weight needs scales f32 [N]')
        elif w.dtype not in ('f32', 'bf16'):
            raise self.err(n, 'weight must be f32, bf16 or i8')
        elif sc is not None:
            raise self.err(n, 'scales only go with an i8 weight')
        prune = self.iattr(n, 'prune')
        if prune:
            if w.dtype == 'i8':
                raise self.err(n, 'prune=1 needs an f32 or bf16 weight')
            if len(w.shape) == 2 and w.shape[1] % 4:
                raise self.err(n, 'prune=1: K=%d is not a multiple of 4' % w.shape[1])
        if len(w.shape) != 2 or not x.shape or x.shape[-1] != w.shape[1]:
            raise self.err(n, 'x.shape[-1] must equal weight.shape[1] (weight [N,K])')
        if w.kind != 'weight' or (sc is not None and sc.kind != 'weight'):
            raise self.err(n, 'the weight (and scales) of a qlinear must be graph weights')
        act = n.attrs.get('act', 'none')
        if act not in ACTS:
            raise self.err(n, "act=%s is not one of %s" % (act, ', '.join(ACTS)))
        glu = self.iattr(n, 'glu')
        if glu and w.shape[0] % 2:
            raise self.err(n, 'glu needs an even weight.shape[0] (gate and up rows)')
        y = self.new_buf(n.outs[0], x.dtype, x.shape[:-1] + [w.shape[0] // 2 if glu else w.shape[0]])
        self.epi_check(n, b, r, w.shape[0], y.shape)
        xv, yv, rv = x, y, r
        if len(x.shape) > 2:
            x2, y2 = flatten2(x), flatten2(y)
            if x2 and y2:
                if r is None or len(r.shape) <= 1:
                    xv, yv = x2, y2
                elif r.shape == y.shape and flatten2(r):
                    xv, yv, rv = x2, y2, flatten2(r)
        if len(xv.shape) != 2:
            raise self.err(n, 'x does not flatten to 2-D')
        self.set_out(n, 0, y)
        if (self.spec_max_m and not glu and not prune and x.dtype == 'f32' and
                xv.stride == [xv.shape[1], 1] and yv.stride == [yv.shape[1], 1] and
                1 <= xv.shape[0] <= self.spec_max_m and xv.shape[1] <= 131071):
            self.qlinear_instance(n, xv, w, sc, b, rv, yv, act)
            return
        if (w.base, prune) not in self.qpack_of:
            self.qpack_of[(w.base, prune)] = len(self.qpacks)
            self.qpacks.append((w, sc, prune))
        qk = self.qpack_of[(w.base, prune)]

        def emit(G):
            L = ['kern_qlinear_params qp;', 'memset(&qp, 0, sizeof qp);']
            if act != 'none':
                L.append('qp.epilogue.act = %s;' % ACTS[act])
            if glu:
                L.append('qp.epilogue.glu = 1;')
            L += G.tview('tx', xv) + G.tview('ty', yv)
            if b is not None:
                L += G.tview('tbias', b) + ['qp.epilogue.bias = &tbias;']
            if rv is not None:
                L += G.tview('tres', rv) + ['qp.epilogue.residual = &tres;']
            return L + G.call('qp', 'kern_qlinear(ctx, &tx, m->qw[%d], &ty, &qp' % qk, 'kern_qlinear')
        self.add_step(n, [x, w, sc, b, r], [y], emit, ws=True)

    def qlinear_instance(self, n, x, w, sc, b, r, y, act):
        """A small-M qlinear through a generated instance (kern_gen.py
        qlinear): kern_qlinear's bits, with x's codes in the arena."""
        M, K = x.shape
        N = w.shape[0]
        key = (M, N, K)
        if key not in self.qinstances:
            self.qinstances.append(key)
        qi = self.qinstances.index(key)
        if w.base not in self.qipack_of:
            self.qipack_of[w.base] = len(self.qipacks)
            self.qipacks.append((w, sc, qi))
        ip = self.qipack_of[w.base]
        KP = (K + 3) // 4 * 4
        work = self.new_buf(n.outs[0] + '.codes', 'i8', [3 * M * KP + 8 * M])
        nm = self.name

        def tiles(G):
            # on an AMX context: kern_qlinear on the weight packed for it
            # at prepare (m->qit), the executor's call
            L = ['kern_qlinear_params qp;', 'memset(&qp, 0, sizeof qp);']
            if act != 'none':
                L.append('qp.epilogue.act = %s;' % ACTS[act])
            L += G.tview('tx', x) + G.tview('ty', y) + epi_views(G, 'qp.epilogue', b, r, y)
            return L + G.call('qp', 'kern_qlinear(ctx, &tx, m->qit[%d], &ty, &qp' % ip, 'kern_qlinear')

        def emit(G):
            return library_or_instance(G, 'm->qit[%d]' % ip, tiles, emit_instance)

        def emit_instance(G):
            L = ['float *py = %s;' % G.ptr(y, True), 'kern_epilogue ep;', 'memset(&ep, 0, sizeof ep);']
            if b is not None:
                L += G.tview('tbias', b) + ['ep.bias = &tbias;']
            if act != 'none':
                L.append('ep.act = %s;' % ACTS[act])
            if r is not None:
                rb = Val(r.name, r.dtype, y.shape)
                rb.stride, rb.base, rb.off, rb.kind = G.bstrides(r, y.shape), r.base, r.off, r.kind
                L += G.tview('tres', rb) + ['ep.residual = &tres;']
            L.append('st = %s__qi%d__run_epi(ctx, %s, (const int8_t *)m->qp[%d], py, %s, %s);' % (
                nm, qi, G.ptr(x), ip, '&ep' if (b is not None or act != 'none' or r is not None)
                else 'NULL', G.ptr(work, True)))
            return L
        self.add_step(n, [x, w, sc, b, r], [y, work], emit, ws=True)

    def op_sparse24_linear(self, n, ins):
        """2:4 sparse linear (kern_sparse24_linear): the weight compressed
        once at prepare (pruned first with prune=1), the handle in m->sw[];
        on an AMX context a bf16 weight is expanded and prepacked dense for
        kern_gemm's tiles instead (m->swd[]), as the executor does. Its
        checks (kern__ginfer_sparse24)."""
        x, w, b, r = ins
        self.need_float(n, x, w)
        if len(w.shape) != 2 or not x.shape or x.shape[-1] != w.shape[1]:
            raise self.err(n, 'x.shape[-1] must equal weight.shape[1] (weight [N,K])')
        if x.dtype != w.dtype:
            raise self.err(n, 'x and weight must have the same dtype')
        if w.shape[1] % 4:
            raise self.err(n, 'K=%d is not a multiple of 4' % w.shape[1])
        if w.kind != 'weight':
            raise self.err(n, 'the weight of a sparse24_linear must be a graph weight')
        if w.stride != [w.shape[1], 1]:
            raise self.err(n, 'the weight of a sparse24_linear must be contiguous [N,K]')
        act = n.attrs.get('act', 'none')
        if act not in ('none', 'gelu', 'gelu_tanh'):
            raise self.err(n, 'act=%s: a sparse24_linear takes none, gelu or gelu_tanh' % act)
        y = self.new_buf(n.outs[0], x.dtype, x.shape[:-1] + [w.shape[0]])
        self.epi_check(n, b, r, w.shape[0], y.shape)
        xv, yv, rv = rows_view(x, y, r)
        if len(xv.shape) != 2:
            raise self.err(n, 'x does not flatten to 2-D')
        self.set_out(n, 0, y)
        key = (w.base, self.iattr(n, 'prune'))
        if key not in self.spack_of:
            self.spack_of[key] = len(self.spacks)
            self.spacks.append((w, key[1]))
        j = self.spack_of[key]

        def emit(G):
            dense = gemm_params(False, 0.0, act, 0.0) + ['gp.trans_b = 1;']
            dense += G.tview('ta', xv) + G.tview('ty', yv) + epi_views(G, 'gp.epilogue', b, rv, yv)
            dense += ['gp.packed_b = m->swd[%d];' % j]
            dense += G.call('gp', 'kern_gemm(ctx, &ta, NULL, &ty, &gp', 'kern_gemm')
            sp = ['kern_sparse24_linear_params sp;', 'memset(&sp, 0, sizeof sp);']
            if act != 'none':
                sp.append('sp.epilogue.act = %s;' % ACTS[act])
            sp += G.tview('tx', xv) + G.tview('ty', yv) + epi_views(G, 'sp.epilogue', b, rv, yv)
            sp += G.call('sp', 'kern_sparse24_linear(ctx, &tx, m->sw[%d], &ty, &sp' % j,
                         'kern_sparse24_linear')
            return (['if (m->swd[%d]) { /* bf16 on AMX: expanded at prepare */' % j] +
                    ['    ' + l for l in dense] + ['} else {'] + ['    ' + l for l in sp] + ['}'])
        self.add_step(n, [x, w, b, r], [y], emit, ws=True)

    def op_sdpa_relpos(self, n, ins):
        """SAM's attention with the decomposed relative-position bias fused
        (kern_sdpa's rel_pos options; the grid from the tables' lengths).
        The executor's checks (kern__ginfer_sdpa_relpos)."""
        q, k, v, rh, rw = ins
        self.need_float(n, q)
        if len(q.shape) != 4 or len(k.shape) != 4 or len(v.shape) != 4:
            raise self.err(n, 'q, k, v must be 4-D [B,H,L,D]')
        if k.dtype != q.dtype or v.dtype != q.dtype:
            raise self.err(n, 'q, k, v must have the same dtype')
        for d in range(3):
            if q.shape[d] != k.shape[d] or q.shape[d] != v.shape[d]:
                raise self.err(n, 'q, k, v differ in dim %d' % d)
        if q.shape[3] != k.shape[3]:
            raise self.err(n, 'q.shape[3]=%d != k.shape[3]=%d' % (q.shape[3], k.shape[3]))
        if not is_float(rh.dtype) or not is_float(rw.dtype):
            raise self.err(n, 'rel_pos_h and rel_pos_w must be float')
        if len(rh.shape) != 2 or len(rw.shape) != 2 or rh.shape[1] != q.shape[3] or \
                rw.shape[1] != q.shape[3]:
            raise self.err(n, 'rel_pos_h and rel_pos_w must be [2*g-1, D]')
        if rh.shape[0] % 2 == 0 or rw.shape[0] % 2 == 0:
            raise self.err(n, 'rel_pos_h has %d rows, rel_pos_w %d: each must be 2*g-1' % (
                rh.shape[0], rw.shape[0]))
        gh, gw = (rh.shape[0] + 1) // 2, (rw.shape[0] + 1) // 2
        if q.shape[2] != gh * gw:
            raise self.err(n, 'L=%d but the tables give a %d x %d grid' % (q.shape[2], gh, gw))
        scale = self.fattr(n, 'scale')
        y = self.new_buf(n.outs[0], q.dtype, q.shape[:3] + [v.shape[3]])
        self.set_out(n, 0, y)

        def emit(G):
            L = ['kern_sdpa_params sp;', 'memset(&sp, 0, sizeof sp);']
            L += G.tview('tq', q) + G.tview('tk', k) + G.tview('tv', v) + G.tview('ty', y)
            L += G.tview('trh', rh) + G.tview('trw', rw)
            if scale:
                L.append('sp.scale = %s;' % c_float(scale))
            L += ['sp.rel_pos_h = &trh;', 'sp.rel_pos_w = &trw;',
                  'sp.rel_q_h = sp.rel_k_h = %d;' % gh, 'sp.rel_q_w = sp.rel_k_w = %d;' % gw]
            return L + G.call('sp', 'kern_sdpa(ctx, &tq, &tk, &tv, &ty, &sp', 'kern_sdpa')
        self.add_step(n, [q, k, v, rh, rw], [y], emit, ws=True)

    def op_quantize_per_token(self, n, ins):
        x = ins[0]
        if x.dtype not in ('f32', 'bf16'):
            raise self.err(n, 'x must be f32 or bf16')
        if not x.shape:
            raise self.err(n, 'x needs at least 1 dim')
        if len(n.outs) != 2:
            raise self.err(n, 'quantize_per_token has two outputs (codes, scales)')
        q = self.new_buf(n.outs[0], 'i8', list(x.shape))
        s = self.new_buf(n.outs[1], 'f32', list(x.shape[:-1]) + [1])
        self.set_out(n, 0, q)
        self.set_out(n, 1, s)

        def emit(G):
            return (G.tview('tx', x) + G.tview('tq', q) + G.tview('ts', s) +
                    ['kern_quant_params pq;', 'memset(&pq, 0, sizeof pq);'] +
                    G.call('pq', 'kern_quantize_per_token(ctx, &tx, &tq, &ts, &pq',
                           'kern_quantize_per_token'))
        self.add_step(n, [x], [q, s], emit, ws=True)

    def gemm_step(self, n, x, w, b, r, y, trans_a, trans_b):
        self.need_float(n, x, w)
        act = n.attrs.get('act', 'none')
        if act not in ACTS:
            raise self.err(n, "act=%s is not one of %s" % (act, ', '.join(ACTS)))
        alpha_set = 'alpha' in n.attrs
        alpha = self.fattr(n, 'alpha')
        out_scale = self.fattr(n, 'out_scale')
        packable = n.op == 'linear' and w.kind == 'weight' and len(w.shape) == 2
        gx, gy, gr = rows_view(x, y, r)  # a matmul's rows too, for the GEMV
        xv, yv, rv = (gx, gy, gr) if n.op == 'linear' else (x, y, r)
        self.set_out(n, 0, y)
        glu = n.op == 'linear' and self.iattr(n, 'glu')
        # f32 and bf16 instances (x, W and y of one dtype; a bf16 linear's
        # bias bf16 or f32)
        idt = x.dtype if x.dtype in ('f32', 'bf16') and w.dtype == x.dtype else None
        if (self.spec_max_m and idt and not glu and n.op == 'linear' and packable and
                len(xv.shape) == 2 and xv.stride == [xv.shape[1], 1] and
                yv.stride == [yv.shape[1], 1] and 1 <= xv.shape[0] <= self.spec_max_m and
                (b is None or (b.dtype in (idt, 'f32') and b.stride == [1]))):
            self.gemm_instance(n, xv, w, b, rv, yv, act, alpha_set, alpha, out_scale, idt)
            return
        gw = w
        if n.op == 'matmul' and not trans_b and len(w.shape) == 2:
            gw = transposed(w)
        if self.gemv_ok(n, trans_a, alpha_set, alpha, gw, gx, gy, b, gr):
            self.gemv_step(n, gx, gw, b, gr, gy, act, out_scale, glu)
            return
        pk = None
        if packable:  # kern_gemm's packing (the instances pack their own way)
            if w.base not in self.pack_of:
                self.pack_of[w.base] = len(self.packs)
                self.packs.append(w)
            pk = self.pack_of[w.base]

        def emit(G):
            L = gemm_params(alpha_set, alpha, act, out_scale) + [
                'gp.trans_a = %d;' % trans_a, 'gp.trans_b = %d;' % trans_b]
            if glu:
                L.append('gp.epilogue.glu = 1;')
            L += G.tview('ta', xv) + G.tview('ty', yv)
            if b is not None:
                L += G.tview('tbias', b) + ['gp.epilogue.bias = &tbias;']
            if rv is not None:
                L += G.tview('tres', rv) + ['gp.epilogue.residual = &tres;']
            if pk is not None:
                L += ['gp.packed_b = m->pb[%d];' % pk]
                return L + G.call('gp', 'kern_gemm(ctx, &ta, NULL, &ty, &gp', 'kern_gemm')
            L += G.tview('tb', w)
            return L + G.call('gp', 'kern_gemm(ctx, &ta, &tb, &ty, &gp', 'kern_gemm')
        self.add_step(n, [x, w, b, r], [y], emit, ws=True)

    def gemv_ok(self, n, trans_a, alpha_set, alpha, w, xv, yv, b, rv):
        """The executor's decode-sized linears and matmuls
        (kern__g_gemv_node and kern__g_gemv_args): a linear whose weight is
        not prepacked (at most GEMV_M rows at the binding, or not a graph
        weight), or a matmul against a 2-D b, with at most GEMV_M rows of
        x runs kern_linear_gemv, which streams the weight once per call.
        w is the weight as kern_linear_gemv reads it, [N, K] (a matmul's b
        transposed unless trans_b); the layout tests are its own."""
        gdt = ('f32', 'bf16', 'f16')
        if n.op not in ('linear', 'matmul') or trans_a or (alpha_set and alpha != 1.0):
            return False
        if len(w.shape) != 2 or w.dtype not in gdt:
            return False
        if len(xv.shape) != 2 or len(yv.shape) != 2 or xv.shape[0] > GEMV_M:
            return False
        if xv.dtype not in gdt or yv.dtype not in gdt:
            return False
        K, N = xv.shape[1], w.shape[0]
        kmajor = K > 1 and w.stride[1] != 1
        if K > 1 and xv.stride[1] != 1:
            return False
        if kmajor and (w.stride[1] < 0 or (N > 1 and w.stride[0] != 1)):
            return False
        if xv.stride[0] < 0 or w.stride[0] < 0:
            return False
        if b is not None and len(b.shape) != 1:
            return False
        if rv is not None and (len(rv.shape) != 2 or rv.shape != yv.shape):
            return False
        return True

    def gemv_step(self, n, xv, w, b, rv, yv, act, out_scale, glu):
        if w.base[0] == 'mw':
            self.keep_merged.add(w.base[1])  # read as it is: not freed at prepare

        def emit(G):
            L = ['kern_gemv_params vp;', 'memset(&vp, 0, sizeof vp);']
            if act != 'none':
                L.append('vp.epilogue.act = %s;' % ACTS[act])
            if out_scale:
                L.append('vp.epilogue.out_scale = %s;' % c_float(out_scale))
            if glu:
                L.append('vp.epilogue.glu = 1;')
            L += G.tview('ta', xv) + G.tview('ty', yv) + G.tview('tw', w)
            if b is not None:
                L += G.tview('tbias', b) + ['vp.epilogue.bias = &tbias;']
            if rv is not None:
                L += G.tview('tres', rv) + ['vp.epilogue.residual = &tres;']
            L.append('st = kern_linear_gemv(ctx, &ta, &tw, &ty, &vp);')
            return L
        self.add_step(n, [xv, w, b, rv], [yv], emit)

    def gemm_instance(self, n, x, w, b, r, y, act, alpha_set, alpha, out_scale, dt='f32'):
        """A small-M linear through a generated GEMM instance (kern_gen.py
        gemm): another summation order than kern_gemm, so within f32
        tolerance of the executor, not bit for bit (bf16: the f32 sums
        differ in the last bits, so y may round to the neighbouring bf16).
        A bf16 instance's weight is packed bf16 into m->ip (float-typed
        storage, bf16 panels)."""
        M, K = x.shape
        N = w.shape[0]
        key = (M, N, K, dt)
        if key not in self.instances:
            self.instances.append(key)
        gi = self.instances.index(key)
        wi = w.base
        if wi not in self.ipack_of:
            self.ipack_of[wi] = len(self.ipacks)
            self.ipacks.append((w, gi))
        ip = self.ipack_of[wi]
        epi = alpha_set or act != 'none' or r is not None or out_scale or (
            b is not None and b.dtype != dt)
        nm = self.name
        pk = 'm->ip[%d]' % ip if dt == 'f32' else '(const uint16_t *)(const void *)m->ip[%d]' % ip
        # an instance copies x (bf16: widened to f32) into its row tiles'
        # layout once per call: into the arena
        xw = self.new_buf(n.outs[0] + '.x_f32', 'f32', [M, K])

        def tiles(G):
            # a bf16 instance on an AMX context: kern_gemm with the weight
            # packed for it at prepare (m->ipt), the executor's call
            L = gemm_params(alpha_set, alpha, act, out_scale) + G.tview('ta', x) + G.tview('ty', y)
            L += epi_views(G, 'gp.epilogue', b, r, y) + ['gp.packed_b = m->ipt[%d];' % ip]
            return L + G.call('gp', 'kern_gemm(ctx, &ta, NULL, &ty, &gp', 'kern_gemm')

        def emit(G):
            if dt == 'bf16':
                return library_or_instance(G, 'm->ipt[%d]' % ip, tiles, emit_instance)
            return [] if G.query else emit_instance(G)

        def emit_instance(G):
            xb = ', (float *)(void *)%s' % G.ptr(xw, True) if xw is not None else ''
            L = ['%s *py = %s;' % (CTYPE[dt], G.ptr(y, True))]
            if not epi:
                return L + ['st = %s__gi%d__run_epi(ctx, %s, %s, %s, py, NULL, 1.0f%s);' % (
                    nm, gi, G.ptr(x), pk, 'NULL' if b is None else G.ptr(b), xb)]
            # kern_gemm's epilogue (kern__epilogue_apply_f32): its order and
            # roundings, applied per task to the panels it computed
            L += ['kern_epilogue ep;', 'memset(&ep, 0, sizeof ep);']
            if b is not None:
                L += G.tview('tbias', b) + ['ep.bias = &tbias;']
            if act != 'none':
                L.append('ep.act = %s;' % ACTS[act])
            if r is not None:
                rb = Val(r.name, r.dtype, y.shape)
                rb.stride, rb.base, rb.off, rb.kind = G.bstrides(r, y.shape), r.base, r.off, r.kind
                L += G.tview('tres', rb) + ['ep.residual = &tres;']
            if out_scale:
                L.append('ep.out_scale = %s;' % c_float(out_scale))
            L.append('st = %s__gi%d__run_epi(ctx, %s, %s, NULL, py, &ep, %s%s);' % (
                nm, gi, G.ptr(x), pk, c_float(alpha) if alpha_set else '1.0f', xb))
            return L
        self.add_step(n, [x, w, b, r], [y, xw], emit, ws=dt == 'bf16')

    def op_sdpa(self, n, ins):
        q, k, v, mask, klens = ins
        self.need_float(n, q, k, v)
        if len(q.shape) != 4 or len(k.shape) != 4 or len(v.shape) != 4:
            raise self.err(n, 'q, k, v must be 4-D [B,H,L,D]')
        a = {key: self.iattr(n, key) for key in ('is_causal', 'causal_bottom_right', 'enable_gqa')}
        scale, softcap = self.fattr(n, 'scale'), self.fattr(n, 'softcap')
        window = self.ilist(n, 'window', 2)
        # the executor's checks (kern__ginfer_sdpa), so a graph it refuses
        # is refused here too, not at run time
        if k.dtype != q.dtype or v.dtype != q.dtype:
            raise self.err(n, 'q, k, v must have the same dtype')
        if q.shape[0] != k.shape[0] or q.shape[0] != v.shape[0]:
            raise self.err(n, 'batch dims differ')
        if q.shape[3] != k.shape[3]:
            raise self.err(n, 'q.shape[3]=%d != k.shape[3]=%d' % (q.shape[3], k.shape[3]))
        if k.shape[1] != v.shape[1] or k.shape[2] != v.shape[2]:
            raise self.err(n, 'k and v differ in heads or length')
        if q.shape[1] != k.shape[1]:
            if not a['enable_gqa']:
                raise self.err(n, 'q has %d heads, k %d (enable_gqa not set)' % (q.shape[1], k.shape[1]))
            if k.shape[1] == 0 or q.shape[1] % k.shape[1]:
                raise self.err(n, 'q heads %d are not a multiple of k heads %d' % (q.shape[1], k.shape[1]))
        full = [q.shape[0], q.shape[1], q.shape[2], k.shape[2]]
        if mask is not None:
            if mask.dtype != 'bool' and not is_float(mask.dtype):
                raise self.err(n, 'mask must be bool or float')
            if len(mask.shape) > 4 or bcast_shape(mask.shape, full) != full:
                raise self.err(n, 'mask does not broadcast to %s' % full)
        if klens is not None and (klens.dtype not in ('i32', 'i64') or klens.shape != [q.shape[0]]):
            raise self.err(n, 'k_lens must be i32 or i64 [B]')
        if softcap < 0:
            raise self.err(n, 'scale must be finite, softcap finite and >= 0')
        if window is not None and (window[0] < -1 or window[1] < -1):
            raise self.err(n, 'window sides must be >= -1')
        y = self.new_buf(n.outs[0], q.dtype, q.shape[:3] + [v.shape[3]])
        self.set_out(n, 0, y)

        def emit(G):
            L = ['kern_sdpa_params sp;', 'memset(&sp, 0, sizeof sp);']
            L += G.tview('tq', q) + G.tview('tk', k) + G.tview('tv', v) + G.tview('ty', y)
            for key, val in a.items():
                if val:
                    L.append('sp.%s = %d;' % (key, val))
            if scale:
                L.append('sp.scale = %s;' % c_float(scale))
            if softcap:
                L.append('sp.softcap = %s;' % c_float(softcap))
            if window is not None:
                lo, hi = window
                L += ['sp.window_set = 1;', 'sp.window_left = %d;' % lo,
                      'sp.window_right = %d;' % hi]
            if mask is not None:
                L += G.tview('tm', mask) + ['sp.attn_mask = &tm;']
            if klens is not None:
                L += G.tview('tkl', klens) + ['sp.k_lens = &tkl;']
            return L + G.call('sp', 'kern_sdpa(ctx, &tq, &tk, &tv, &ty, &sp', 'kern_sdpa')
        self.add_step(n, [q, k, v, mask, klens], [y], emit, ws=True)

    def op_layer_norm(self, n, ins):
        x, w, b, r = ins
        self.need_float(n, x, w, b, r)
        act = n.attrs.get('act', 'none')
        if act not in ACTS:
            raise self.err(n, 'act=%s is not a kern_act' % act)
        # the executor's checks (kern__ginfer_norm)
        if not x.shape:
            raise self.err(n, 'x needs at least 1 dim')
        if any(t is not None and t.shape != [x.shape[-1]] for t in (w, b)):
            raise self.err(n, 'weight and bias must be [%d]' % x.shape[-1])
        if r is not None and r.shape != x.shape:
            raise self.err(n, "residual must have x's shape")
        if len(n.outs) > 2 or (len(n.outs) == 2 and r is None):
            raise self.err(n, 'a norm has 1 output, or 2 with a residual (the sum x + residual)')
        if act not in ('none', 'gelu', 'gelu_tanh'):
            raise self.err(n, 'act=%s (norms fuse none/gelu/gelu_tanh)' % act)
        if 'eps' in n.attrs and self.fattr(n, 'eps') < 0:
            raise self.err(n, 'eps must be finite and >= 0')
        y = self.new_buf(n.outs[0], x.dtype, x.shape)
        self.set_out(n, 0, y)
        y1 = None
        if len(n.outs) > 1:
            y1 = self.new_buf(n.outs[1], x.dtype, x.shape)
            self.set_out(n, 1, y1)
        eps_set = 'eps' in n.attrs
        eps = self.fattr(n, 'eps')
        kind = 'KERN_NORM_RMS' if n.op == 'rms_norm' else 'KERN_NORM_LAYER'
        H = x.shape[-1] if x.shape else 0
        R = x.numel() // H if H else 0

        # f32 norms; bf16 ones (weight and bias bf16 or f32, one dtype)
        # without a fused act (kern_norm rounds act's result once, an act
        # after the instance would round twice)
        idt = x.dtype if x.dtype == 'f32' or (x.dtype == 'bf16' and act == 'none') else None
        wdts = set(t.dtype for t in (w, b) if t is not None)
        wdt = wdts.pop() if len(wdts) == 1 else idt

        def dense(v):
            return v is None or (v.dtype == idt and v.shape == x.shape and v.contiguous())
        if (self.spec_max_m and idt and H % 8 == 0 and H and R and dense(x) and dense(y) and
                dense(r) and dense(y1) and wdt in ('f32', idt) and
                all(t is None or (t.dtype == wdt and t.shape == [H] and t.stride == [1]) for t in (w, b))):
            key = ('rms' if n.op == 'rms_norm' else 'layer', R, H, eps if eps_set else f32(1e-5), idt, wdt)
            if key not in self.norm_instances:
                self.norm_instances.append(key)
            ni = self.norm_instances.index(key)
            nm = self.name

            def emit_i(G):
                L = ['%s *py = %s;' % (CTYPE[idt], G.ptr(y, True)),
                     'st = %s__ni%d_run(ctx, %s, %s, %s, %s, py, %s);' % (
                         nm, ni, G.ptr(x), 'NULL' if r is None else G.ptr(r),
                         'NULL' if w is None else G.ptr(w), 'NULL' if b is None else G.ptr(b),
                         'NULL' if y1 is None else G.ptr(y1, True))]
                if act != 'none':  # kern_gemm's epilogue with act only: kern's activation
                    L += ['{', '    kern_epilogue ep;', '    memset(&ep, 0, sizeof ep);',
                          '    ep.act = %s;' % ACTS[act],
                          '    kern__epilogue_apply_f32(ctx, py, %d, %d, 0, %d, 1.0f, &ep);' % (H, R, H),
                          '}']
                return L
            self.add_step(n, [x, w, b, r], [y, y1], emit_i)
            return

        def emit(G):
            L = ['kern_norm_params np;', 'memset(&np, 0, sizeof np);', 'np.norm = %s;' % kind]
            if act != 'none':
                L.append('np.act = %s;' % ACTS[act])
            if eps_set:
                L += ['np.eps = %s;' % c_float(eps), 'np.eps_set = 1;']
            L += G.tview('tx', x) + G.tview('ty', y)
            for nm, t in (('weight', w), ('bias', b), ('residual', r), ('residual_out', y1)):
                if t is not None:
                    L += G.tview('t_' + nm, t) + ['np.%s = &t_%s;' % (nm, nm)]
            return L + G.call('np', 'kern_norm(ctx, &tx, &ty, &np', 'kern_norm')
        self.add_step(n, [x, w, b, r], [y, y1], emit, ws=True)

    op_rms_norm = op_layer_norm

    # elementwise and executor-owned ops: constant-bound loops
    def op_unary(self, n, ins):
        x = ins[0]
        self.need_float(n, x)
        y = self.new_buf(n.outs[0], x.dtype, x.shape)
        self.set_out(n, 0, y)
        f0 = self.fattr(n, 'alpha') if n.op == 'scale' else self.fattr(n, 'exponent')
        expr = unary_expr(n.op, f0)
        self.add_step(n, [x], [y], lambda G: G.map_loop(y, [x], expr))

    def op_binary(self, n, ins):
        a, b = ins
        self.need_float(n, a, b)
        shape = bcast_shape(a.shape, b.shape)
        if shape is None:
            raise self.err(n, 'shapes do not broadcast')
        dt = a.dtype
        if a.dtype != b.dtype and len(b.shape) > len(a.shape):
            dt = b.dtype
        y = self.new_buf(n.outs[0], dt, shape)
        self.set_out(n, 0, y)
        sym = {'add': '+', 'sub': '-', 'mul': '*', 'div': '/'}[n.op]
        self.add_step(n, [a, b], [y], lambda G: G.map_loop(y, [a, b], 'v0 %s v1' % sym))

    op_add = op_sub = op_mul = op_div = op_binary

    def op_copy(self, n, ins):
        x = ins[0]
        dt = x.dtype
        if n.op == 'cast':  # (kern__ginfer_copy's rules)
            dt = n.attrs.get('dtype', 'invalid')
            if dt not in ('f32', 'bf16', 'f16', 'i32', 'i64'):
                raise self.err(n, 'cast to %s (f32, bf16, f16, i32, i64)' % dt)
            if x.dtype in ('i8', 'u8'):
                raise self.err(n, 'cast from %s' % x.dtype)
        y = self.new_buf(n.outs[0], dt, x.shape)
        self.set_out(n, 0, y)
        if is_float(x.dtype) and is_float(dt):
            def emit(G):
                # f32 <-> bf16/f16 of whole buffers: kern_convert (vectorized,
                # over the context's threads, the scalar conversions' bits)
                if x.dtype != dt and 'f32' in (x.dtype, dt) and x.contiguous() and \
                        y.contiguous() and x.numel() and not G.may_overlap(x, y):
                    return ['st = kern_convert(ctx, %s, %s, %s, %s, %d);' % (
                        DTYPES[x.dtype][0], G.ptr(x), DTYPES[dt][0], G.ptr(y, True), x.numel()),
                        'if (st) return st;']
                return G.map_loop(y, [x], 'v0')
            self.add_step(n, [x], [y], emit)
        else:
            self.add_step(n, [x], [y], lambda G: G.cast_loop(y, x))

    op_cast = op_copy

    def op_softmax(self, n, ins):
        x = ins[0]
        if x.dtype != 'f32' or not x.shape:
            raise self.err(n, 'softmax is generated for f32 with at least 1 dim')
        y = self.new_buf(n.outs[0], x.dtype, x.shape)
        self.set_out(n, 0, y)
        self.add_step(n, [x], [y], lambda G: G.softmax(y, x))

    def op_reduce_mean(self, n, ins):
        x = ins[0]
        self.need_float(n, x)
        if not x.shape:
            raise self.err(n, 'x needs at least 1 dim')
        y = self.new_buf(n.outs[0], x.dtype, x.shape[:-1] + [1])
        self.set_out(n, 0, y)
        self.add_step(n, [x], [y], lambda G: G.reduce(y, x, n.op == 'reduce_mean'))

    op_reduce_sum = op_reduce_mean

    # ---- decoder and graph ops: one kern call each, as the executor's step
    def op_silu_mul(self, n, ins):
        a, b = ins
        self.need_float(n, a, b)
        if not a.shape:
            raise self.err(n, 'a must have at least 1 dim')
        shape = list(a.shape)
        if b is not None:
            if b.shape != a.shape:
                raise self.err(n, 'a and b must have the same shape')
        elif shape[-1] % 2:
            raise self.err(n, "without b, a's last dim must be even ([gate | up])")
        else:
            shape[-1] //= 2
        y = self.new_buf(n.outs[0], a.dtype, shape)
        self.set_out(n, 0, y)

        def emit(G):
            L = G.tview('ta', a) + G.tview('ty', y)
            if b is not None:
                L += G.tview('tb', b)
            return L + ['st = kern_silu_mul(ctx, &ta, %s, &ty);' % ('&tb' if b is not None else 'NULL')]
        self.add_step(n, [a, b], [y], emit)

    def op_rope(self, n, ins):
        x, t, off = ins
        self.need_float(n, x)
        if len(x.shape) != 4:
            raise self.err(n, 'x must be 4-D [B,L,H,D]')
        if t.dtype != 'f32' or len(t.shape) != 2 or t.shape[1] % 2 or t.shape[1] > x.shape[3]:
            raise self.err(n, "table must be f32 [P, rotary_dim], rotary_dim even and <= D")
        if off is not None and (off.dtype not in ('i32', 'i64') or off.shape != [x.shape[0]]):
            raise self.err(n, 'offsets must be i32 or i64 [B]')
        inter = self.iattr(n, 'interleaved')
        y = self.new_buf(n.outs[0], x.dtype, list(x.shape))
        self.set_out(n, 0, y)

        def emit(G):
            L = ['kern_rope_params rp;', 'memset(&rp, 0, sizeof rp);',
                 'rp.style = %s;' % ('KERN_ROPE_INTERLEAVED' if inter else 'KERN_ROPE_HALF')]
            L += G.tview('tx', x) + G.tview('ty', y) + G.tview('tt', t) + ['rp.table = &tt;']
            if off is not None:
                L += G.tview('to', off) + ['rp.offsets = &to;']
            return L + ['st = kern_rope(ctx, &tx, &ty, &rp);']
        self.add_step(n, [x, t, off], [y], emit)

    def op_argmax(self, n, ins):
        self.lastdim(n, ins[0], 0)

    def op_topk(self, n, ins):
        self.lastdim(n, ins[0], self.iattr(n, 'k'))

    def lastdim(self, n, x, k):
        """argmax / topk over the last dim (kern__g_lastdim): one call over x
        as [rows, V] when it flattens, else one call per [.., V] slab."""
        self.need_float(n, x)
        if not x.shape:
            raise self.err(n, 'x needs at least 1 dim')
        V = x.shape[-1]
        if n.op == 'argmax':
            if V == 0:
                raise self.err(n, 'argmax over an empty last dim')
            y = self.new_buf(n.outs[0], 'i64', list(x.shape[:-1]))
            self.set_out(n, 0, y)
            y1 = None
        else:
            if k < 1:
                raise self.err(n, 'k=%d must be >= 1' % k)
            if k > V:
                raise self.err(n, 'k=%d > the last dim %d' % (k, V))
            if len(n.outs) != 2:
                raise self.err(n, 'topk has two outputs (values, indices)')
            y = self.new_buf(n.outs[0], x.dtype, list(x.shape[:-1]) + [k])
            y1 = self.new_buf(n.outs[1], 'i64', list(x.shape[:-1]) + [k])
            self.set_out(n, 0, y)
            self.set_out(n, 1, y1)
        rows = functools_prod(x.shape[:-1])
        x2 = flatten2(x) if len(x.shape) >= 2 else None
        if len(x.shape) == 1:
            x2 = Val(x.name, x.dtype, [1, V])
            x2.stride, x2.base, x2.off, x2.kind = [0, x.stride[0]], x.base, x.off, x.kind
        if x2 is None and rows > 256:
            raise self.err(n, 'x does not flatten to [rows, V] and has %d rows' % rows)

        def as2(v, cols):  # a contiguous buffer as [rows, cols]
            w = Val(v.name, v.dtype, [rows, cols])
            w.stride, w.base, w.off, w.kind = [cols, 1], v.base, v.off, v.kind
            return w

        def as1(v):
            w = Val(v.name, v.dtype, [rows])
            w.stride, w.base, w.off, w.kind = [1], v.base, v.off, v.kind
            return w

        def call(G, xv, yv, iv):
            if n.op == 'argmax':
                return G.tview('tx', xv) + G.tview('ti', yv) + ['st = kern_argmax(ctx, &tx, &ti);']
            return G.tview('tx', xv) + G.tview('tv', yv) + G.tview('ti', iv) + [
                'st = kern_topk(ctx, &tx, &tv, &ti);']

        def emit(G):
            if x2 is not None:
                return call(G, x2, as1(y) if n.op == 'argmax' else as2(y, k),
                            None if n.op == 'argmax' else as2(y1, k))
            # slabs: x's leading dims one [1, V] row at a time
            L, lead = [], x.shape[:-1]
            for r in range(rows):
                idx, rem = [], r
                for d in reversed(lead):
                    idx.append(rem % d)
                    rem //= d
                idx.reverse()
                xo = x.off + sum(i * st for i, st in zip(idx, x.stride[:-1]))
                xv = Val(x.name, x.dtype, [1, V])
                xv.stride, xv.base, xv.off, xv.kind = [0, x.stride[-1]], x.base, xo, x.kind
                cols = 1 if n.op == 'argmax' else k
                yv = Val(y.name, y.dtype, [1] if n.op == 'argmax' else [1, k])
                yv.stride, yv.base, yv.off, yv.kind = ([1] if n.op == 'argmax' else [k, 1]), y.base, \
                    y.off + r * cols, y.kind
                iv = None
                if y1 is not None:
                    iv = Val(y1.name, 'i64', [1, k])
                    iv.stride, iv.base, iv.off, iv.kind = [k, 1], y1.base, y1.off + r * k, y1.kind
                L += ['{'] + ['    ' + l for l in call(G, xv, yv, iv)] + ['    if (st) return st;', '}']
            return L
        self.add_step(n, [x], [y, y1], emit)

    # ---- the KV cache: graph inputs written in place (the caller's buffers)
    def kv_scale(self, n, c, sc, cname, sname, inplace):
        if c.dtype != 'i8':
            if sc is not None:
                raise self.err(n, '%s applies to an i8 %s only' % (sname, cname))
            return
        if sc is None:
            raise self.err(n, 'an i8 %s needs %s [B,Lmax,Hkv] f32' % (cname, sname))
        if sc.dtype != 'f32' or len(c.shape) != 4 or sc.shape != c.shape[:3]:
            raise self.err(n, '%s must be f32 [B,Lmax,Hkv] of %s' % (sname, cname))
        if inplace and sc.kind != 'input':
            raise self.err(n, '%s must be a graph input (it is written in place)' % sname)

    def op_kv_append(self, n, ins):
        kn, vn, kc, vc, kl, ks, vs = ins
        self.need_float(n, kn, vn)
        if any(len(t.shape) != 4 for t in (kn, vn, kc, vc)):
            raise self.err(n, 'k_new, v_new, k_cache, v_cache must be 4-D')
        if kc.kind != 'input' or vc.kind != 'input':
            raise self.err(n, 'k_cache and v_cache must be graph inputs (they are written in place)')
        self.kv_scale(n, kc, ks, 'k_cache', 'k_scale', True)
        self.kv_scale(n, vc, vs, 'v_cache', 'v_scale', True)
        for d in range(4):
            if (d != 1 and (kn.shape[d] != kc.shape[d] or vn.shape[d] != vc.shape[d])) or \
                    (d < 3 and kn.shape[d] != vn.shape[d]):
                raise self.err(n, 'the new rows and the caches disagree in dim %d' % d)
        if kc.shape[1] != vc.shape[1]:
            raise self.err(n, 'k_cache and v_cache differ in Lmax')
        if kl.dtype not in ('i32', 'i64') or kl.shape != [kn.shape[0]]:
            raise self.err(n, 'k_lens must be i32 or i64 [B]')
        y = self.new_buf(n.outs[0], kl.dtype, [kn.shape[0]])
        self.set_out(n, 0, y)

        def emit(G):
            # the output starts as k_lens and is advanced by the append (the
            # executor's step); the caches are the caller's inputs
            es = DTYPES[kl.dtype][1]
            L = ['{', '    const char *ls = (const char *)%s;' % G.ptr(kl),
                 '    char *ld = (char *)%s;' % G.ptr(y, True),
                 '    for (int64_t b = 0; b < %d; b++) memcpy(ld + b * %d, ls + b * %d, %d);' % (
                     kn.shape[0], es, kl.stride[0] * es, es), '}',
                 'kern_kv_append_params ap;', 'memset(&ap, 0, sizeof ap);']
            L += G.tview('tkn', kn) + G.tview('tvn', vn) + G.tview('tkc', kc) + G.tview('tvc', vc)
            L += G.tview('tl', y)
            if ks is not None:
                L += G.tview('tks', ks) + ['ap.k_scale = &tks;']
            if vs is not None:
                L += G.tview('tvs', vs) + ['ap.v_scale = &tvs;']
            return L + ['st = kern_kv_append_ex(ctx, &tkn, &tvn, &tkc, &tvc, &tl, &ap);']
        self.add_step(n, [kn, vn, kl, ks, vs], [y, kc, vc, ks, vs], emit)

    def op_decode_attention(self, n, ins):
        q, kc, vc, kl, ks, vs = ins
        self.need_float(n, q)
        if any(len(t.shape) != 4 for t in (q, kc, vc)):
            raise self.err(n, 'q, k_cache, v_cache must be 4-D [B,L,H,D]')
        self.kv_scale(n, kc, ks, 'k_cache', 'k_scale', False)
        self.kv_scale(n, vc, vs, 'v_cache', 'v_scale', False)
        if kc.dtype not in ('f32', 'bf16', 'f16', 'i8') or vc.dtype not in ('f32', 'bf16', 'f16', 'i8'):
            raise self.err(n, 'the caches must be f32, bf16, f16 or i8')
        if q.shape[0] != kc.shape[0] or q.shape[0] != vc.shape[0]:
            raise self.err(n, 'batch dims differ')
        if q.shape[3] != kc.shape[3] or kc.shape[1] != vc.shape[1] or kc.shape[2] != vc.shape[2]:
            raise self.err(n, 'q, k_cache and v_cache disagree in D, Lmax or Hkv')
        if kc.shape[2] < 1 or q.shape[2] % kc.shape[2]:
            raise self.err(n, "q's heads are not a multiple of the cache's")
        if kl.dtype not in ('i32', 'i64') or kl.shape != [q.shape[0]]:
            raise self.err(n, 'k_lens must be i32 or i64 [B]')
        scale = self.fattr(n, 'scale')
        if not math.isfinite(scale):
            raise self.err(n, 'scale must be finite')
        y = self.new_buf(n.outs[0], q.dtype, q.shape[:3] + [vc.shape[3]])
        self.set_out(n, 0, y)
        B, LQ, H, D = q.shape
        HKV, DV, LMAX = kc.shape[2], vc.shape[3], kc.shape[1]
        key = None
        if (self.spec_max_m and B * LQ and da_fits(B, LQ, H, HKV, D, DV) and
                all(t.stride[3] == 1 for t in (q, kc, vc, y))):
            # a generated instance (kern_gen.py's decode-attention instances)
            s1 = f32(scale) if scale else f32(1.0 / math.sqrt(D))
            key = (B, LQ, H, HKV, D, DV, LMAX, q.dtype, kc.dtype, vc.dtype, kl.dtype,
                   (tuple(q.stride), tuple(kc.stride), tuple(vc.stride), tuple(y.stride),
                    tuple(kl.stride), tuple(ks.stride) if ks is not None else (0, 0, 0),
                    tuple(vs.stride) if vs is not None else (0, 0, 0)),
                   f32(s1 * 1.4426950408889634), ks is not None, vs is not None)
        sp = DA_SPLIT
        if key is not None and self.da_decide:
            sp = self.da_decide(key)  # --autotune: the split, or 0: the library was faster
            if not sp:
                key = None
        if key is not None:
            if key not in self.da_instances:
                self.da_instances.append(key)
                self.da_split[key] = sp
            di = self.da_instances.index(key)
            NS = max(1, (LMAX + sp - 1) // sp)
            part = self.new_buf(n.outs[0] + '.part', 'f32', [B * NS * H * LQ * (DV + 2)])
            nm = self.name

            def emit_i(G):
                return ['st = %s__da%d_run(ctx, %s, %s, %s, %s, %s, %s, %s, %s);' % (
                    nm, di, G.ptr(q), G.ptr(kc), G.ptr(vc), G.ptr(kl),
                    'NULL' if ks is None else G.ptr(ks), 'NULL' if vs is None else G.ptr(vs),
                    G.ptr(y, True), G.ptr(part, True))]
            self.add_step(n, [q, kc, vc, kl, ks, vs], [y, part], emit_i)
            return

        def emit(G):
            L = ['kern_decode_attention_params dp;', 'memset(&dp, 0, sizeof dp);']
            L += G.tview('tq', q) + G.tview('tk', kc) + G.tview('tv', vc) + G.tview('tl', kl)
            L += G.tview('ty', y)
            if scale:
                L.append('dp.scale = %s;' % c_float(scale))
            if ks is not None:
                L += G.tview('tks', ks) + ['dp.k_scale = &tks;']
            if vs is not None:
                L += G.tview('tvs', vs) + ['dp.v_scale = &tvs;']
            return L + G.call('dp', 'kern_decode_attention(ctx, &tq, &tk, &tv, &tl, &ty, &dp',
                              'kern_decode_attention')
        self.add_step(n, [q, kc, vc, kl, ks, vs], [y], emit, ws=True)

    def op_scatter_reduce(self, n, ins):
        me, idx, src = ins
        if idx.dtype not in ('i32', 'i64'):
            raise self.err(n, 'index must be i32 or i64')
        if src.dtype != me.dtype or me.dtype in ('bool', 'i8', 'u8'):
            raise self.err(n, 'self and src must share a float or i32/i64 dtype')
        red = n.attrs.get('reduce')
        if red not in REDUCES:
            raise self.err(n, 'reduce must be sum, prod, mean, amax or amin')
        ax = self.axis(n, self.iattr(n, 'axis'), len(me.shape))
        if len(idx.shape) == 1 and len(me.shape) == 2 and len(src.shape) == 2:
            if ax != 0:
                raise self.err(n, 'a 1-D index scatters along axis 0')
            if src.shape[1] != me.shape[1]:
                raise self.err(n, 'src and self differ in features')
        else:
            if len(idx.shape) != len(me.shape) or len(src.shape) != len(me.shape):
                raise self.err(n, 'self, index and src need the same rank')
            for d in range(len(me.shape)):
                if d != ax and idx.shape[d] > me.shape[d]:
                    raise self.err(n, 'index dim %d exceeds self\'s' % d)
        inc = self.iattr(n, 'include_self')
        y = self.new_buf(n.outs[0], me.dtype, list(me.shape))
        self.set_out(n, 0, y)
        self.data_scratch = True

        def emit(G):
            return (G.tview('ts', me) + G.tview('ti', idx) + G.tview('tr', src) + G.tview('ty', y) +
                    ['st = kern_scatter_reduce(ctx, &ts, %d, &ti, &tr, %s, %d, &ty, NULL, NULL);' % (
                        ax, REDUCES[red], 1 if inc else 0)])
        self.add_step(n, [me, idx, src], [y], emit)

    def op_spmm_reduce(self, n, ins):
        rp, col, val, x = ins
        if rp.dtype not in ('i32', 'i64') or col.dtype != rp.dtype:
            raise self.err(n, 'rowptr and col must both be i32 or i64')
        if len(rp.shape) != 1 or len(col.shape) != 1:
            raise self.err(n, 'rowptr and col must be 1-D')
        if val is not None and (len(val.shape) != 1 or val.shape != col.shape or not is_float(val.dtype)):
            raise self.err(n, 'values must be float [E] like col')
        self.need_float(n, x)
        if len(x.shape) != 2:
            raise self.err(n, 'dense must be 2-D')
        red = n.attrs.get('reduce')
        if red not in ('sum', 'mean', 'amax', 'amin'):
            raise self.err(n, 'reduce must be sum, mean, amax or amin')
        if rp.shape[0] < 1:
            raise self.err(n, 'rowptr is empty')
        for v in (rp, col, val):
            if v is not None and not v.contiguous():
                raise self.err(n, 'rowptr, col and values must be contiguous')
        y = self.new_buf(n.outs[0], x.dtype, [rp.shape[0] - 1, x.shape[1]])
        self.set_out(n, 0, y)
        self.data_scratch = True

        def emit(G):
            return G.tview('tx', x) + G.tview('ty', y) + [
                'kern_csr csr;', 'memset(&csr, 0, sizeof csr);',
                'csr.nrows = %d;' % (rp.shape[0] - 1), 'csr.ncols = %d;' % x.shape[0],
                'csr.nnz = %d;' % col.shape[0],
                'csr.rowptr = KERN__UNCONST(%s);' % G.ptr(rp), 'csr.col = KERN__UNCONST(%s);' % G.ptr(col),
                'csr.values = %s;' % ('KERN__UNCONST(%s)' % G.ptr(val) if val is not None else 'NULL'),
                'csr.index_dtype = %s;' % DTYPES[rp.dtype][0],
                'csr.value_dtype = %s;' % (DTYPES[val.dtype][0] if val is not None else 'KERN_F32'),
                'st = kern_spmm_reduce(ctx, &csr, &tx, &ty, %s, NULL, NULL);' % REDUCES[red]]
        self.add_step(n, [rp, col, val, x], [y], emit)

    def op_embedding(self, n, ins):
        ids, t = ins
        if ids.dtype not in ('i32', 'i64') or len(t.shape) != 2:
            raise self.err(n, 'ids must be i32/i64 and the table 2-D [V,H]')
        y = self.new_buf(n.outs[0], t.dtype, ids.shape + [t.shape[1]])
        self.set_out(n, 0, y)
        self.add_step(n, [ids, t], [y], lambda G: G.embedding(n, y, ids, t))

    def op_concat(self, n, ins):
        xs = [x for x in ins if x is not None]
        if not xs:
            raise self.err(n, 'concat needs inputs')
        ax = self.axis(n, self.iattr(n, 'axis'), len(xs[0].shape))
        shape = list(xs[0].shape)
        shape[ax] = sum(x.shape[ax] for x in xs)
        for x in xs:
            if len(x.shape) != len(shape) or x.dtype != xs[0].dtype or any(
                    x.shape[d] != shape[d] for d in range(len(shape)) if d != ax):
                raise self.err(n, 'inputs differ beyond the concat axis')
        y = self.new_buf(n.outs[0], xs[0].dtype, shape)
        self.set_out(n, 0, y)

        def emit(G):
            L, off = [], 0
            for x in xs:
                part = self.view(y, y.name, x.shape, y.stride, off * y.stride[ax])
                L += ['{'] + ['    ' + s for s in G.copy_loop(part, x)] + ['}']
                off += x.shape[ax]
            return L
        self.add_step(n, xs, [y], emit)

    # views
    def op_reshape(self, n, ins):
        x = ins[0]
        shape = self.listattr(n, 'shape') or []
        total = x.numel()
        known = 1
        for d in shape:
            if d != -1:
                known *= d
        if shape.count(-1) > 1:
            raise self.err(n, 'at most one -1 in shape')
        if -1 in shape:
            if known == 0 or total % known:
                raise self.err(n, 'cannot infer -1 for %s' % shape)
            shape[shape.index(-1)] = total // known
        if x.numel() != functools_prod(shape):
            raise self.err(n, 'shape %s has %d elements, x has %d' % (
                shape, functools_prod(shape), total))
        st = reshape_strides(x.shape, x.stride, shape)
        if st is None:
            c = self.new_buf(n.outs[0], x.dtype, x.shape)
            self.add_step(n, [x], [c], lambda G, c=c, x=x: G.copy_loop(c, x))
            x = c
            st = contiguous(shape)
        self.set_out(n, 0, self.view(x, n.outs[0], shape, st, x.off))

    def op_permute(self, n, ins):
        x = ins[0]
        nd = len(x.shape)
        if n.op == 'transpose':
            a0 = self.axis(n, self.iattr(n, 'axis'), nd)
            a1 = self.axis(n, self.iattr(n, 'axis2'), nd)
            perm = list(range(nd))
            perm[a0], perm[a1] = perm[a1], perm[a0]
        else:
            perm = self.ilist(n, 'perm') or []  # (0..nd-1, as the executor takes it)
            if sorted(perm) != list(range(nd)):
                raise self.err(n, 'perm %s is not a permutation of %d dims' % (perm, nd))
        self.set_out(n, 0, self.view(x, n.outs[0], [x.shape[p] for p in perm],
                                     [x.stride[p] for p in perm], x.off))

    op_transpose = op_permute

    def op_slice(self, n, ins):
        x = ins[0]
        ax = self.axis(n, self.iattr(n, 'axis'), len(x.shape))
        start = self.dattr(n, 'start') or 0
        length = self.dattr(n, 'length') or (x.shape[ax] - start)
        if start + length > x.shape[ax] or length < 0:
            raise self.err(n, 'slice [%d, %d) is past dim %d (%d)' % (
                start, start + length, ax, x.shape[ax]))
        shape = list(x.shape)
        shape[ax] = length
        self.set_out(n, 0, self.view(x, n.outs[0], shape, x.stride, x.off + start * x.stride[ax]))

    def op_split(self, n, ins):
        x = ins[0]
        ax = self.axis(n, self.iattr(n, 'axis'), len(x.shape))
        sizes = self.listattr(n, 'sizes')
        if not sizes:
            k = len(n.outs)
            if x.shape[ax] % k:
                raise self.err(n, 'dim %d (%d) does not split into %d' % (ax, x.shape[ax], k))
            sizes = [x.shape[ax] // k] * k
        if len(sizes) != len(n.outs) or sum(sizes) != x.shape[ax]:
            raise self.err(n, 'sizes %s do not split dim %d (%d) into %d outputs' % (
                sizes, ax, x.shape[ax], len(n.outs)))
        off = 0
        for i, s in enumerate(sizes):
            shape = list(x.shape)
            shape[ax] = s
            self.set_out(n, i, self.view(x, n.outs[i], shape, x.stride,
                                         x.off + off * x.stride[ax]))
            off += s

    def op_expand(self, n, ins):
        x = ins[0]
        shape = self.listattr(n, 'shape') or []
        lead = len(shape) - len(x.shape)
        if lead < 0:
            raise self.err(n, 'shape has fewer dims than x')
        st = []
        for i, d in enumerate(shape):
            if i < lead:
                if d == -1:
                    raise self.err(n, '-1 in a new leading dim')
                st.append(0)
                continue
            xd, xs = x.shape[i - lead], x.stride[i - lead]
            if d == -1 or d == xd:
                shape[i] = xd
                st.append(xs)
            elif xd == 1:
                st.append(0)
            else:
                raise self.err(n, 'dim %d: cannot expand %d to %d' % (i, xd, d))
        self.set_out(n, 0, self.view(x, n.outs[0], shape, st, x.off))

    def finish_outputs(self):
        used_out_bufs = set()
        for i, (name, _) in enumerate(self.g.outputs):
            v = self.vals[name]
            o = Val(name, v.dtype, v.shape)
            o.kind = 'output'
            o.base = ('out', i)
            if (v.kind == 'node' and v.base[0] == 'buf' and v.off == 0
                    and v.base[1] not in used_out_bufs):
                used_out_bufs.add(v.base[1])
                self.buf_loc[v.base[1]] = ('out', i)
            else:
                self.add_step(None, [v], [o], lambda G, o=o, v=v: G.copy_loop(o, v))
            self.outputs.append(o)


# prepare's test for the library's tile paths (kern_gemm bf16, kern_qlinear
# int8) in place of a generated instance
AMX_CTX = 'kern_ctx_isa(ctx) >= KERN_ISA_AMX && kern_ctx_isa(ctx) < KERN_ISA_NEON'


def library_or_instance(G, handle, lib, instance):
    """A step that calls the library (lib(G)) when prepare packed `handle`
    for it (an AMX context), else the generated instance (instance(G)); the
    workspace query sizes the library call only."""
    L = ['if (%s) {' % handle] + ['    ' + l for l in lib(G)]
    if G.query:
        return L + ['}']
    return L + ['} else {'] + ['    ' + l for l in instance(G)] + ['}']


def gemm_params(alpha_set, alpha, act, out_scale):
    """A kern_gemm_params gp with alpha, the act and out_scale set."""
    L = ['kern_gemm_params gp;', 'memset(&gp, 0, sizeof gp);']
    if alpha_set:
        L += ['gp.alpha_set = 1;', 'gp.alpha = %s;' % c_float(alpha)]
    if act != 'none':
        L.append('gp.epilogue.act = %s;' % ACTS[act])
    if out_scale:
        L.append('gp.epilogue.out_scale = %s;' % c_float(out_scale))
    return L


def epi_views(G, pre, b, r, y):
    """The lines that set pre.bias (a [N] view) and pre.residual (r's view
    broadcast to y's shape) for an epilogue struct pre."""
    L = []
    if b is not None:
        L += G.tview('tbias', b) + ['%s.bias = &tbias;' % pre]
    if r is not None:
        rb = Val(r.name, r.dtype, y.shape)
        rb.stride, rb.base, rb.off, rb.kind = G.bstrides(r, y.shape), r.base, r.off, r.kind
        L += G.tview('tres', rb) + ['%s.residual = &tres;' % pre]
    return L


def functools_prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def is_float(dt):
    return dt in ('f32', 'bf16', 'f16')


def bcast_shape(a, b):
    n = max(len(a), len(b))
    a = [1] * (n - len(a)) + list(a)
    b = [1] * (n - len(b)) + list(b)
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            return None
        out.append(y if x == 1 else x)
    return out


def flatten2(v):
    """v as [rows, last] if its leading dims merge, else None."""
    nd = len(v.shape)
    if nd < 2:
        return None
    for i in range(nd - 2):
        if v.shape[i] != 1 and v.stride[i] != v.stride[i + 1] * v.shape[i + 1]:
            return None
    rows = functools_prod(v.shape[:-1])
    w = Val(v.name, v.dtype, [rows, v.shape[-1]])
    w.stride = [v.stride[nd - 2], v.stride[nd - 1]]
    w.base, w.off, w.kind = v.base, v.off, v.kind
    return w


def rows_view(x, y, r):
    """kern__g_lin_args: x [.., K] and y [.., N] as rows when their leading
    dims merge, with a residual of y's shape merged the same way (one of
    at most 1 dim is left as it is); else all three as they are."""
    if len(x.shape) > 2:
        x2, y2 = flatten2(x), flatten2(y)
        if x2 and y2:
            if r is None or len(r.shape) <= 1:
                return x2, y2, r
            if r.shape == y.shape and flatten2(r):
                return x2, y2, flatten2(r)
    return x, y, r


def transposed(v):
    """The 2-D view v with its two dims swapped (no copy)."""
    w = Val(v.name, v.dtype, [v.shape[1], v.shape[0]])
    w.stride = [v.stride[1], v.stride[0]]
    w.base, w.off, w.kind = v.base, v.off, v.kind
    return w


def unary_expr(op, f0):
    c = c_float(f0)
    return {
        'gelu': '@gelu(v0)', 'gelu_tanh': '@gelu_tanh(v0)', 'silu': '@silu(v0)',
        'relu': 'v0 > 0 ? v0 : (v0 != v0 ? v0 : 0.0f)', 'sigmoid': '1.0f / (1.0f + expf(-v0))',
        'sqrt': 'sqrtf(v0)', 'rsqrt': '1.0f / sqrtf(v0)', 'exp': 'expf(v0)', 'tanh': 'tanhf(v0)',
        'erf': 'erff(v0)', 'neg': '-v0', 'reciprocal': '1.0f / v0', 'scale': c + ' * v0',
        'pow': ('v0 * v0' if f0 == 2.0 else 'v0' if f0 == 1.0 else 'sqrtf(v0)' if f0 == 0.5
                else 'powf(v0, %s)' % c),
    }[op]


# ----------------------------------------------------------------- emission
CTYPE = {'f32': 'float', 'f16': 'uint16_t', 'bf16': 'uint16_t', 'i8': 'int8_t', 'u8': 'uint8_t',
         'bool': 'uint8_t', 'i32': 'int32_t', 'i64': 'int64_t'}
ALIGN = 64


def plan_memory(sizes, lives):
    """Greedy by size, best fit: each buffer into the smallest gap left by
    the placed buffers whose lifetimes overlap it. Returns offsets, total."""
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i], lives[i][0], i))
    placed, offs, total = [], [0] * len(sizes), 0
    for i in order:
        sz = (sizes[i] + ALIGN - 1) // ALIGN * ALIGN
        lo, hi = lives[i]
        busy = sorted((offs[j], offs[j] + (sizes[j] + ALIGN - 1) // ALIGN * ALIGN)
                      for j in placed if not (lives[j][1] < lo or hi < lives[j][0]))
        best, at = None, 0
        for s, e in busy:
            if s - at >= sz and (best is None or s - at < best[0]):
                best = (s - at, at)
            at = max(at, e)
        off = best[1] if best else at
        offs[i] = off
        placed.append(i)
        total = max(total, off + sz)
    return offs, total


class Emitter:
    def __init__(self, low, name):
        self.low, self.name = low, name
        self.helpers = set()
        self.tv = 0
        self.query = False  # emitting NAME__ws_query: sizes, not calls

    def call(self, pv, call, fn):
        """A family call with params `pv`: at run time with the arena's
        workspace; in the query, the family's _workspace_size instead."""
        if self.query:
            assert call.startswith(fn + '(')
            return ['st = %s_workspace_size(%s, &q);' % (fn, call[len(fn) + 1:]),
                    'if (st) return st;',
                    'if (q > *bytes) *bytes = q;']
        return ['%s.workspace = W;' % pv, '%s.workspace_size = WS;' % pv, 'st = %s);' % call]

    # addresses
    def base_expr(self, v):
        kind, i = v.base
        if self.query and kind in ('in', 'out'):  # no memory yet: distinct, never-read bases
            return '(%schar *)%s__fake(%d)' % ('const ' if kind == 'in' else '', self.name,
                                               i + 1 if kind == 'in' else 4096 + i), kind == 'in'
        if self.query and kind == 'buf' and self.low.buf_loc[i][0] == 'out':
            return '(char *)%s__fake(%d)' % (self.name, 4096 + self.low.buf_loc[i][1]), False
        if kind == 'in':
            return '(const char *)inputs[%d]' % i, True
        if kind == 'w':
            return '(const char *)m->w[%d]' % i, True
        if kind == 'mw':
            return '(const char *)m->mw[%d]' % i, True
        if kind == 'const':
            return '(const char *)%s__c%d' % (self.name, i), True
        if kind == 'out':
            return '(char *)outputs[%d]' % i, False
        loc = self.low.buf_loc[i]
        if loc[0] == 'out':
            return '(char *)outputs[%d]' % loc[1], False
        return 'A + %d' % loc[1], False

    def may_overlap(self, a, b):
        """Whether views a and b can share bytes: the same base, or two
        ranges of the arena that intersect."""
        def region(v):
            kind, i = v.base
            if kind == 'buf':
                loc = self.low.buf_loc[i]
                if loc[0] == 'arena':
                    lo = loc[1] + v.off * v.esize()
                    hi = lo + sum((d - 1) * st for d, st in zip(v.shape, v.stride)) * v.esize() + v.esize()
                    return ('arena', lo, hi)
                return ('out', loc[1])
            return (kind, i)
        ra, rb = region(a), region(b)
        if ra[0] == 'arena' and rb[0] == 'arena':
            return ra[1] < rb[2] and rb[1] < ra[2]
        return ra == rb

    def ptr(self, v, write=False):
        b, ro = self.base_expr(v)
        off = v.off * v.esize()
        e = '(%s + %d)' % (b, off) if off else '(%s)' % b
        t = CTYPE[v.dtype]
        if ro or not write:
            return '((const %s *)(const void *)%s)' % (t, e)
        return '((%s *)(void *)%s)' % (t, e)

    def tview(self, var, v):
        """A view as a constant template plus its data pointer: one struct
        copy per call (building it field by field was a tenth of a tiny
        node's time)."""
        nd = len(v.shape)
        b, ro = self.base_expr(v)
        off = v.off * v.esize()
        e = '%s + %d' % (b, off) if off else b
        return ['static const kern_tensor %s_t = {NULL, %s, %d, {%s}, {%s}};' % (
                    var, DTYPES[v.dtype][0], nd, ', '.join(str(d) for d in v.shape) or '0',
                    ', '.join(str(d) for d in v.stride) or '0'),
                'kern_tensor %s = %s_t;' % (var, var),
                '%s.data = KERN__UNCONST(%s);' % (var, e)]

    # loops
    def loops(self, shape, strides, body):
        """Nested constant loops over shape; strides: one list per operand
        (elements, broadcast = 0). body(offset exprs) -> lines."""
        dims = [(shape[d], [s[d] for s in strides]) for d in range(len(shape)) if shape[d] != 1]
        if any(n == 0 for n, _ in dims):
            return ['/* empty */']
        merged = []
        for n, st in dims:
            if merged and all(ps == n * s for ps, s in zip(merged[-1][1], st)):
                merged[-1] = (merged[-1][0] * n, st)
            else:
                merged.append((n, st))
        L, ind = [], ''
        offs = ['0'] * len(strides)
        # a transpose (an operand read along the second-last dim, stride 1
        # there, and far apart along the last): the last two dims in
        # TILE x TILE blocks, so each block's source lines stay in L1
        # while the output is written in rows (the SAM encoder's NHWC ->
        # NCHW output walked the source 1 KiB apart: 4 MB through L2)
        TILE = 16
        tiled = len(merged) >= 2 and merged[-2][0] >= 2 * TILE and merged[-1][0] >= 2 * TILE and \
            any(a == 1 and abs(b) >= TILE for a, b in zip(merged[-2][1], merged[-1][1]))
        nblk = len(merged) - 2 if tiled else len(merged)
        for d, (n, st) in enumerate(merged[:nblk]):
            L.append('%sfor (int64_t i%d = 0; i%d < %d; i%d++) {' % (ind, d, d, n, d))
            ind += '    '
        if tiled:
            for d in (nblk, nblk + 1):
                L.append('%sfor (int64_t b%d = 0; b%d < %d; b%d += %d) {' % (ind, d, d, merged[d][0], d, TILE))
                ind += '    '
            for d in (nblk, nblk + 1):
                n = merged[d][0]
                L.append('%sfor (int64_t i%d = b%d; i%d < (b%d + %d < %d ? b%d + %d : %d); i%d++) {' % (
                    ind, d, d, d, d, TILE, n, d, TILE, n, d))
                ind += '    '
        for d, (n, st) in enumerate(merged):
            offs = [o if s == 0 else ('i%d' % d if s == 1 else 'i%d * %d' % (d, s)) + (
                '' if o == '0' else ' + ' + o) for o, s in zip(offs, st)]
        L += [ind + s for s in body(offs)]
        for d in range(len(merged) + (2 if tiled else 0)):
            ind = ind[:-4]
            L.append(ind + '}')
        return L

    def bstrides(self, v, shape):
        lead = len(shape) - len(v.shape)
        out = [0] * lead
        for i, d in enumerate(v.shape):
            out.append(0 if d == 1 and shape[lead + i] != 1 else v.stride[i])
        return out

    def load(self, v, p, o):
        if v.dtype == 'f32':
            return '%s[%s]' % (p, o)
        if v.dtype == 'bf16':
            return 'kern_bf16_to_f32(%s[%s])' % (p, o)
        if v.dtype == 'f16':
            return 'kern_f16_to_f32(%s[%s])' % (p, o)
        return '(float)%s[%s]' % (p, o)

    def store(self, v, e):
        if v.dtype == 'bf16':
            return 'kern_f32_to_bf16(%s)' % e
        if v.dtype == 'f16':
            return 'kern_f32_to_f16(%s)' % e
        return e

    def map_loop(self, y, xs, expr):
        if '@gelu_tanh' in expr:
            self.helpers.add('gelu_tanh')
        elif '@gelu' in expr:
            self.helpers.add('gelu')
        elif '@silu' in expr:
            self.helpers.add('silu')
        expr = expr.replace('@', self.name + '__')
        L = ['%s *py = %s;' % (CTYPE[y.dtype], self.ptr(y, True))]
        for k, x in enumerate(xs):
            L.append('const %s *p%d = %s;' % (CTYPE[x.dtype], k, self.ptr(x)))
        strides = [y.stride] + [self.bstrides(x, y.shape) for x in xs]

        def body(o):
            b = ['float v%d = %s;' % (k, self.load(x, 'p%d' % k, o[k + 1])) for k, x in enumerate(xs)]
            return b + ['py[%s] = %s;' % (o[0], self.store(y, expr))]
        return L + self.loops(y.shape, strides, body)

    def copy_loop(self, y, x):
        if x.dtype == y.dtype:
            t = CTYPE[y.dtype]
            L = ['%s *py = %s;' % (t, self.ptr(y, True)), 'const %s *p0 = %s;' % (t, self.ptr(x))]
            return L + self.loops(y.shape, [y.stride, self.bstrides(x, y.shape)],
                                  lambda o: ['py[%s] = p0[%s];' % (o[0], o[1])])
        if is_float(x.dtype) and is_float(y.dtype):
            return self.map_loop(y, [x], 'v0')
        return self.cast_loop(y, x)

    def cast_loop(self, y, x):
        L = ['%s *py = %s;' % (CTYPE[y.dtype], self.ptr(y, True)),
             'const %s *p0 = %s;' % (CTYPE[x.dtype], self.ptr(x))]

        def body(o):
            if is_float(x.dtype):
                b = ['double dv = %s;' % self.load(x, 'p0', o[1])]
                if not is_float(y.dtype):
                    b.append('int64_t iv = dv != dv ? 0 : dv >= 9.2e18 ? INT64_MAX : '
                             'dv <= -9.2e18 ? INT64_MIN : (int64_t)dv;')
            else:
                b = ['int64_t iv = (int64_t)p0[%s];' % o[1], 'double dv = (double)iv;']
            if is_float(y.dtype):
                b.append('py[%s] = %s;' % (o[0], self.store(y, '(float)dv')))
            elif y.dtype == 'bool':
                b.append('py[%s] = (uint8_t)(iv != 0);' % o[0])
            else:
                b.append('py[%s] = (%s)iv;' % (o[0], CTYPE[y.dtype]))
            if is_float(x.dtype) and is_float(y.dtype):
                pass
            elif not is_float(y.dtype) and not is_float(x.dtype):
                b.append('(void)dv;')
            elif is_float(y.dtype) and not is_float(x.dtype):
                pass
            return b
        return L + self.loops(y.shape, [y.stride, x.stride], body)

    def rows(self, v_list, shape):
        """Loops over every dim but the last of shape; strides per operand."""
        return shape[:-1], [s[:-1] for s in v_list]

    def softmax(self, y, x):
        n = y.shape[-1]
        L = ['float *py = %s;' % self.ptr(y, True), 'const float *p0 = %s;' % self.ptr(x)]
        sx = x.stride[-1]
        xo = 'j' if sx == 1 else 'j * %d' % sx

        def body(o):
            return ['float *r = py + %s, mx = -INFINITY, sum = 0, inv;' % o[0],
                    'const float *q = p0 + %s;' % o[1],
                    'for (int64_t j = 0; j < %d; j++) r[j] = q[%s];' % (n, xo),
                    'for (int64_t j = 0; j < %d; j++) mx = r[j] > mx ? r[j] : mx;' % n,
                    'for (int64_t j = 0; j < %d; j++) {' % n,
                    '    r[j] = mx == -INFINITY ? 0.0f : expf(r[j] - mx);',
                    '    sum += r[j];',
                    '}',
                    'inv = sum > 0 ? 1.0f / sum : 0.0f;',
                    'for (int64_t j = 0; j < %d; j++) r[j] *= inv;' % n]
        return L + self.loops(y.shape[:-1], [y.stride[:-1], x.stride[:-1]], body)

    def reduce(self, y, x, mean):
        n = x.shape[-1]
        L = ['%s *py = %s;' % (CTYPE[y.dtype], self.ptr(y, True)),
             'const %s *p0 = %s;' % (CTYPE[x.dtype], self.ptr(x))]
        sx = x.stride[-1]

        def body(o):
            q = '%s%s' % ('j' if sx == 1 else 'j * %d' % sx, '' if o[1] == '0' else ' + ' + o[1])
            res = 'acc / (double)%d' % (n or 1) if mean else 'acc'
            return ['double acc = 0;',
                    'for (int64_t j = 0; j < %d; j++) acc += %s;' % (n, self.load(x, 'p0', q)),
                    'py[%s] = %s;' % (o[0], self.store(y, '(float)(%s)' % res))]
        return L + self.loops(y.shape[:-1], [y.stride[:-1], x.stride[:-1]], body)

    def embedding(self, n, y, ids, t):
        V, H = t.shape
        es = t.esize()
        L = ['%s *py = %s;' % (CTYPE[y.dtype], self.ptr(y, True)),
             'const %s *pi = %s;' % (CTYPE[ids.dtype], self.ptr(ids)),
             'const %s *pt = %s;' % (CTYPE[t.dtype], self.ptr(t)),
             'int64_t r = 0;']

        def body(o):
            b = ['int64_t id = (int64_t)pi[%s];' % o[0],
                 'if (id < 0 || id >= %d)' % V,
                 '    return kern__err(KERN_ERR_INDEX, "%s_run: node \'%s\' (embedding): id number '
                 '%%lld is outside [0, %d)", (long long)r);' % (self.name, c_str(n.outs[0]), V)]
            if t.stride[1] == 1:
                b.append('memcpy(py + r * %d, pt + id * %d, %d);' % (H, t.stride[0], H * es))
            else:
                b.append('for (int64_t j = 0; j < %d; j++) py[r * %d + j] = pt[id * %d + j * %d];'
                         % (H, H, t.stride[0], t.stride[1]))
            return b + ['r++;']
        return L + self.loops(ids.shape, [ids.stride], body)


def c_str(s):
    return s.replace('\\', '\\\\').replace('"', '\\"')


def c_ident(s):
    return re.sub(r'[^A-Za-z0-9_]', '_', s)


def const_values(dt, vals):
    if dt == 'f32':
        return [c_float(v) for v in vals]
    if dt == 'bf16':
        out = []
        for v in vals:
            b = struct.unpack('<I', struct.pack('<f', f32(v)))[0]
            if (b & 0x7fffffff) > 0x7f800000:
                out.append('0x%04x' % ((b >> 16) | 0x40))
            else:
                out.append('0x%04x' % ((b + 0x7fff + ((b >> 16) & 1)) >> 16))
        return out
    if dt == 'f16':  # through f32 (kern_f32_to_f16((float)v)); past the largest half, an infinity
        out = []
        for v in vals:
            try:
                out.append('0x%04x' % struct.unpack('<H', struct.pack('<e', f32(v)))[0])
            except OverflowError:
                out.append('0x7c00' if v > 0 else '0xfc00')
        return out
    return ['%d' % int(v) for v in vals]


def dims_list(vs):
    rows = []
    for v in vs:
        d = list(v.shape) + [0] * (8 - len(v.shape))
        rows.append('{%s}' % ', '.join(str(x) for x in d))
    return rows


def emit_pack_gemm(w, N, E, v, rows, cols, dst, dtype, ind='    '):
    """prepare's kern_gemm_pack_b of weight v ([rows, cols], a torch Linear
    weight) into dst; releases the model and returns on error."""
    w(ind + 'kern_gemm_pack_params pp;')
    w(ind + 'kern_tensor t;')
    w(ind + 'static const int64_t d[] = {%d, %d, %d, 1};' % (rows, cols, cols))
    w(ind + 'memset(&pp, 0, sizeof pp);')
    w(ind + 'pp.trans_b = 1;')
    w(ind + '%s__view(&t, %s, %s, 2, d);' % (N, E.base_expr(v)[0], dtype))
    w(ind + 'st = kern_gemm_pack_b(ctx, &t, &%s, &pp);' % dst)
    emit_prepare_check(w, N, ind)


def emit_pruned_call(w, N, v, numel, call, ind):
    """prepare: weight view t pruned 2:4 (kern_sparse24_prune) into a scratch
    copy pr, then call (which reads pr), the scratch freed."""
    w(ind + '{')
    w(ind + '    kern_tensor pr = t;')
    w(ind + '    void *tmp;')
    emit_prepare_alloc(w, N, 'tmp', numel * v.esize(), ind + '    ', what=' pruning a weight')
    w(ind + '    pr.data = tmp;')
    w(ind + '    st = kern_sparse24_prune(ctx, &t, &pr, NULL);')
    w(ind + '    if (!st) st = %s;' % call)
    w(ind + '    kern__free(ctx, tmp);')
    w(ind + '}')


def emit_pack_qweight(w, N, E, v, sc, rows, cols, dst, ind='    ', prune=False):
    """prepare's kern_qweight_pack (a float weight; with prune, of a copy
    pruned 2:4 by kern_sparse24_prune first: the executor's qlinear
    prune=1) or kern_qweight_pack_int8 (i8 codes and the f32 scales sc) of
    weight v [rows, cols] into dst."""
    w(ind + 'kern_tensor t;')
    w(ind + 'static const int64_t d[] = {%d, %d, %d, 1};' % (rows, cols, cols))
    w(ind + '%s__view(&t, %s, %s, 2, d);' % (N, E.base_expr(v)[0], DTYPES[v.dtype][0]))
    if prune:
        emit_pruned_call(w, N, v, rows * cols, 'kern_qweight_pack(ctx, &pr, &%s, NULL)' % dst, ind)
    elif sc is None:
        w(ind + 'st = kern_qweight_pack(ctx, &t, &%s, NULL);' % dst)
    else:
        w(ind + '{')
        w(ind + '    kern_tensor ts;')
        w(ind + '    static const int64_t ds[] = {%d, 1};' % sc.shape[0])
        w(ind + '    %s__view(&ts, %s, KERN_F32, 1, ds);' % (N, E.base_expr(sc)[0]))
        w(ind + '    st = kern_qweight_pack_int8(ctx, &t, &ts, &%s, NULL);' % dst)
        w(ind + '}')
    emit_prepare_check(w, N, ind)


def emit_pack_sparse24(w, N, E, v, prune, dst, dense, ind):
    """prepare's kern_sparse24_compress of weight v [N, K] into dst, after
    kern_sparse24_prune into a scratch copy with prune; a bf16 weight on an
    AMX context then goes dense: decompressed and packed for kern_gemm's
    tiles into dense, dst freed (the executor's plan, same bits)."""
    rows, cols = v.shape
    w(ind + 'kern_tensor t;')
    w(ind + 'static const int64_t d[] = {%d, %d, %d, 1};' % (rows, cols, cols))
    w(ind + '%s__view(&t, %s, %s, 2, d);' % (N, E.base_expr(v)[0], DTYPES[v.dtype][0]))
    if prune:
        emit_pruned_call(w, N, v, rows * cols, 'kern_sparse24_compress(ctx, &pr, &%s, NULL)' % dst, ind)
    else:
        w(ind + 'st = kern_sparse24_compress(ctx, &t, &%s, NULL);' % dst)
    emit_prepare_check(w, N, ind)
    if v.dtype != 'bf16':
        return
    w(ind + 'if (kern_ctx_isa(ctx) == KERN_ISA_AMX) { /* no sparse tile product: dense tiles */')
    w(ind + '    kern_tensor dw;')
    w(ind + '    kern_gemm_pack_params pp;')
    w(ind + '    static const int64_t dsh[] = {%d, %d};' % (rows, cols))
    w(ind + '    void *tmp;')
    emit_prepare_alloc(w, N, 'tmp', rows * cols * 2, ind + '    ', what=' expanding a 2:4 weight')
    w(ind + '    st = kern_tensor_init(&dw, tmp, KERN_BF16, 2, dsh);')
    w(ind + '    if (!st) st = kern_sparse24_decompress(ctx, %s, &dw);' % dst)
    w(ind + '    memset(&pp, 0, sizeof pp);')
    w(ind + '    pp.trans_b = 1;')
    w(ind + '    if (!st) st = kern_gemm_pack_b(ctx, &dw, &%s, &pp);' % dense)
    w(ind + '    kern__free(ctx, tmp);')
    emit_prepare_check(w, N, ind + '    ')
    w(ind + '    kern_sparse24_free(ctx, %s);' % dst)
    w(ind + '    %s = NULL;' % dst)
    w(ind + '}')


def emit_prepare_check(w, N, ind):
    w(ind + 'if (st) {')
    w(ind + '    %s_release(ctx, m);' % N)
    w(ind + '    return st;')
    w(ind + '}')


def emit_prepare_alloc(w, N, dst, nbytes, ind='    ', cast='', what=''):
    """prepare's kern__alloc of nbytes into dst (cast: the C cast the
    pointer needs, for C++); releases the model and returns on failure
    (the message ends in what, e.g. ' pruning a weight')."""
    w(ind + '%s = %skern__alloc(ctx, (size_t)%s);' % (dst, cast, nbytes))
    w(ind + 'if (!%s) {' % dst)
    w(ind + '    %s_release(ctx, m);' % N)
    w(ind + '    return kern__err(KERN_ERR_NOMEM, "%s_prepare: out of memory%s");' % (N, what))
    w(ind + '}')


def emit_model(low, name, banner):
    N = name
    U = name.upper()
    E = Emitter(low, name)
    # lifetimes of arena buffers
    lives = {}
    for si, s in enumerate(low.steps):
        for v in s.writes:
            if v is not None and v.base[0] == 'buf':
                b = v.base[1]
                lo, hi = lives.get(b, (si, si))
                lives[b] = (min(lo, si), max(hi, si))
        for v in s.reads:
            if v.base[0] == 'buf':
                b = v.base[1]
                lo, hi = lives.get(b, (si, si))
                lives[b] = (min(lo, si), max(hi, si))
    arena_ids = [b for b in range(len(low.bufs)) if low.buf_loc.get(b, ('arena',))[0] != 'out'
                 and b in lives]
    offs, total = plan_memory([low.bufs[b] for b in arena_ids], [lives[b] for b in arena_ids])
    for b, o in zip(arena_ids, offs):
        low.buf_loc[b] = ('arena', o)
    body = []
    n_family = 0
    for s in low.steps:
        what = ("node '%s' (%s)" % (s.node.outs[0], s.node.op)) if s.node else \
            "output '%s'" % s.writes[0].name
        body.append('    /* %s */' % what.replace('*/', '* /'))
        lines = s.emit(E)
        family = s.node is not None and s.node.op in ('linear', 'matmul', 'sdpa', 'layer_norm',
                                                      'rms_norm', 'qlinear', 'quantize_per_token',
                                                      'silu_mul', 'rope', 'argmax', 'topk',
                                                      'scatter_reduce', 'spmm_reduce', 'kv_append',
                                                      'decode_attention', 'sparse24_linear',
                                                      'sdpa_relpos')
        n_family += family
        body.append('    {')
        body += ['        ' + l for l in lines]
        if family:
            body.append('        if (st) return st;')
        body.append('    }')
    sum_bytes = sum(low.bufs[b] for b in arena_ids)
    # the families' workspace: sized at prepare for its context by the same
    # calls over never-read addresses, placed after the intermediates
    ws_steps = [st for st in low.steps if st.ws]
    query = []
    E.query = True
    for st_ in ws_steps:
        query.append('    /* %s */' % ("node '%s' (%s)" % (st_.node.outs[0], st_.node.op)).replace('*/', '* /'))
        query += ['    {', '        size_t q = 0;'] + ['        ' + l for l in st_.emit(E)] + ['    }']
    E.query = False
    arena_al = (total + ALIGN - 1) // ALIGN * ALIGN
    o = []
    w = o.append
    w('/* %s.h -- generated by gen/kern_gen.py; do not edit.' % N)
    for b in banner:
        w(' *   %s' % b.replace('*/', '* /'))
    w(' *   arena: %d bytes (%d bytes if every intermediate had its own memory)' % (total, sum_bytes))
    w(' *')
    w(' *     #define %s_IMPLEMENTATION   (in one file; kern itself is built with' % U)
    w(' *     #include "%s.h"              KERN_IMPLEMENTATION in one file)' % N)
    w(' *     %s_model m;' % N)
    w(' *     %s_prepare(ctx, weights, &m);    weights in %s_weight_names order' % (N, N))
    w(' *     %s_run(ctx, &m, inputs, outputs, arena);' % N)
    w(' *     %s_release(ctx, &m);' % N)
    w(' *')
    written = sorted(set(v.base[1] for st in low.steps for v in st.writes
                         if v is not None and v.base[0] == 'in'))
    w(' * Inputs and outputs are contiguous, of exactly the shapes below (the')
    w(' * binding is fixed); %s_run writes the inputs %s_input_written marks' % (N, N))
    w(' * (KV caches kv_append fills in place: writable memory the caller keeps')
    w(' * between runs) and only reads the others. Written here:%s' % (' none.' if not written else ''))
    line = ' *  '
    for k, i in enumerate(written):
        item = " '%s'%s" % (low.inputs[i].name.replace('*/', '* /'), '.' if k == len(written) - 1 else ',')
        if len(line) + len(item) > 76:
            w(line)
            line = ' *  '
        line += item
    if written:
        w(line)
    w(' * The arena is %s_arena_bytes(&m) bytes, 64-byte' % N)
    w(' * aligned, owned by the caller: the intermediates (%s_ARENA_SIZE bytes),' % U)
    w(' * then the kernels\' workspace for the context %s_prepare was given' % N)
    w(' * (on a context of another thread count or ISA they take that context\'s')
    w(' * scratch instead). The weights must outlive the model. */')
    w('#ifndef %s_H' % U)
    w('#define %s_H' % U)
    w('#include "kern.h"')
    w('')
    w('#define %s_ARENA_SIZE ((size_t)%d)' % (U, total))
    w('#define %s_BIND "%s"' % (U, c_str(','.join('%s=%d' % kv for kv in low.g.syms.items()
                                                   if kv[1] is not None))))
    w('#define %s_N_INPUTS %d' % (U, len(low.inputs)))
    w('#define %s_N_OUTPUTS %d' % (U, len(low.outputs)))
    w('#define %s_N_WEIGHTS %d' % (U, len(low.weights)))
    w('#define %s_N_PACKED %d' % (U, len(low.packs)))
    w('#define %s_N_QWEIGHTS %d' % (U, len(low.qpacks)))
    w('#define %s_N_SPARSE24 %d' % (U, len(low.spacks)))
    w('/* 1: scatter_reduce / spmm_reduce size their scratch from the index data at')
    w(' * run time and take it from the context (grown on a first run, as in the')
    w(' * executor); 0: %s_run allocates nothing */' % N)
    w('#define %s_DATA_SCRATCH %d' % (U, 1 if low.data_scratch else 0))
    w('')
    w('typedef struct %s_model {' % N)
    w('    const void *w[%s_N_WEIGHTS + 1];          /* the caller\'s weights */' % U)
    w('    kern_gemm_packed_b *pb[%s_N_PACKED + 1];  /* linear weights, packed once */' % U)
    w('    kern_qweight *qw[%s_N_QWEIGHTS + 1];      /* qlinear weights, int8, packed once */' % U)
    w('    kern_sparse24 *sw[%s_N_SPARSE24 + 1];     /* sparse24_linear weights, compressed once */' % U)
    w('    kern_gemm_packed_b *swd[%s_N_SPARSE24 + 1]; /* the same expanded dense (bf16 on AMX) */' % U)
    w('    float *ip[%d];  /* weights packed for the GEMM instances */' % (len(low.ipacks) + 1))
    w('    kern_gemm_packed_b *ipt[%d]; /* bf16 instance weights packed for kern_gemm\'s tiles instead */'
      % (len(low.ipacks) + 1))
    w('    void *qp[%d];   /* int8 weights packed for the qlinear instances */' % (len(low.qipacks) + 1))
    w('    kern_qweight *qit[%d]; /* the same packed for kern_qlinear\'s tiles instead */' % (len(low.qipacks) + 1))
    w('    void *mw[%d];   /* merged Q/K/V biases (their weights live packed) */' % (
        len(low.merged) + 1))
    w('    size_t ws;      /* the kernels\' workspace in the arena, after the intermediates */')
    w('    int ws_threads, ws_isa; /* the context it was sized for */')
    w('} %s_model;' % N)
    w('')
    for kind, vs in (('input', low.inputs), ('output', low.outputs), ('weight', low.weights)):
        w('extern const char *const %s_%s_names[%s_N_%sS + 1];' % (N, kind, U, kind.upper()))
        w('extern const kern_dtype %s_%s_dtypes[%s_N_%sS + 1];' % (N, kind, U, kind.upper()))
        w('extern const int %s_%s_ndim[%s_N_%sS + 1];' % (N, kind, U, kind.upper()))
        w('extern const int64_t %s_%s_shapes[%s_N_%sS + 1][8];' % (N, kind, U, kind.upper()))
    w('/* 1 for an input %s_run writes in place (a KV cache or its scales) */' % N)
    w('extern const int %s_input_written[%s_N_INPUTS + 1];' % (N, U))
    w('')
    w('/* Packs the linear weights (kern_gemm_pack_b; qlinear ones with')
    w(' * kern_qweight_pack) once. On error nothing')
    w(' * stays allocated and *m is zeroed. */')
    w('kern_status %s_prepare(kern_ctx *ctx, const void *const *weights, %s_model *m);' % (N, N))
    w('void %s_release(kern_ctx *ctx, %s_model *m);' % (N, N))
    w('/* Bytes of the arena %s_run takes: %s_ARENA_SIZE rounded up to 64, plus' % (N, U))
    w(' * the workspace of the context %s_prepare was given. */' % N)
    w('size_t %s_arena_bytes(const %s_model *m);' % (N, N))
    emit_st_decl(w, low, N, U)
    w('kern_status %s_run(kern_ctx *ctx, const %s_model *m, const void *const *inputs,' % (N, N))
    w('                   void *const *outputs, void *arena);')
    emit_impl_open(w, U, bool(low.instances or low.norm_instances or low.qinstances or
                              low.da_instances))
    w('')
    for kind, vs in (('input', low.inputs), ('output', low.outputs), ('weight', low.weights)):
        K = kind.upper()
        w('const char *const %s_%s_names[%s_N_%sS + 1] = {%s};' % (
            N, kind, U, K, ', '.join(['"%s"' % c_str(v.name) for v in vs] + ['NULL'])))
        w('const kern_dtype %s_%s_dtypes[%s_N_%sS + 1] = {%s};' % (
            N, kind, U, K, ', '.join([DTYPES[v.dtype][0] for v in vs] + ['KERN_DTYPE_NONE'])))
        w('const int %s_%s_ndim[%s_N_%sS + 1] = {%s};' % (
            N, kind, U, K, ', '.join([str(len(v.shape)) for v in vs] + ['0'])))
        w('const int64_t %s_%s_shapes[%s_N_%sS + 1][8] = {%s};' % (
            N, kind, U, K, ', '.join(dims_list(vs) + ['{0}'])))
    w('const int %s_input_written[%s_N_INPUTS + 1] = {%s};' % (
        N, U, ', '.join(['1' if i in written else '0' for i in range(len(low.inputs))] + ['0'])))
    for i, (v, vals) in enumerate(low.consts):
        w('static const %s %s__c%d[%d] = {%s}; /* %s */' % (
            CTYPE[v.dtype], N, i, max(len(vals), 1),
            ', '.join(const_values(v.dtype, vals)) or '0', v.name.replace('*/', '* /')))
    if ('view' in E.helpers or low.packs or low.qpacks or low.qipacks or low.spacks or
            any(low.instances[gi][3] == 'bf16' for _, gi in low.ipacks)):
        w('')
        w('static void %s__view(kern_tensor *t, const void *p, kern_dtype dt, int nd,' % N)
        w('                     const int64_t *ss) {')
        w('    int i;')
        w('    memset(t, 0, sizeof *t);')
        w('    t->data = KERN__UNCONST(p);')
        w('    t->dtype = dt;')
        w('    t->ndim = nd;')
        w('    for (i = 0; i < nd; i++) {')
        w('        t->shape[i] = ss[i];')
        w('        t->stride[i] = ss[nd + i];')
        w('    }')
        w('}')
    for act in ('gelu', 'gelu_tanh', 'silu'):
        if act in E.helpers:  # kern's activations: the executor's and the epilogues' bits
            w('')
            w('static float %s__%s(float x) { return kern_act_f32(%s, x); }' % (N, act, ACTS[act]))
    for gi, key in enumerate(low.instances):
        o.append(emit_gemm('%s__gi%d' % (N, gi), key[0], key[1], key[2], [], impl_only=True,
                           cfg=low.inst_cfg.get(key), dt=key[3]).rstrip('\n'))
    for qi, (Mi, Ni, Ki) in enumerate(low.qinstances):
        o.append(emit_qlinear('%s__qi%d' % (N, qi), Mi, Ni, Ki, [], impl_only=True,
                              cfg=low.qinst_cfg.get((Mi, Ni, Ki)),
                              pack_t=any(sc is None and q == qi for _, sc, q in low.qipacks)
                              ).rstrip('\n'))
    for di, key in enumerate(low.da_instances):
        o.append(emit_decode_attn('%s__da%d' % (N, di), key, low.da_split[key]).rstrip('\n'))
    for ni, (kind, Ri, Hi, epsi, dti, wdti) in enumerate(low.norm_instances):
        if dti == 'bf16':
            o.append(emit_norm_bf16('%s__ni%d' % (N, ni), Ri, Hi, kind, epsi, wdti, [],
                                    impl_only=True).rstrip('\n'))
        else:
            o.append(emit_norm('%s__ni%d' % (N, ni), Ri, Hi, kind, epsi, [], impl_only=True).rstrip('\n'))
    if ws_steps:
        w('')
        w('/* never-read addresses for the workspace query: distinct per input and')
        w(' * output, so the kernels see the run\'s layout and aliasing */')
        w('static char *%s__fake(int k) { return (char *)(uintptr_t)((uint64_t)k << 36); }' % N)
        w('')
        w('/* the largest workspace any kernel call of the run asks of ctx */')
        w('static kern_status %s__ws_query(kern_ctx *ctx, const %s_model *m, size_t *bytes) {' % (N, N))
        w('    char *A = %s__fake(8192);' % N)
        w('    kern_status st = KERN_OK;')
        w('    *bytes = 0;')
        w('    (void)A;')
        w('    (void)m;')
        o.extend(query)
        w('    return st;')
        w('}')
    w('')
    w('size_t %s_arena_bytes(const %s_model *m) {' % (N, N))
    w('    return (size_t)%d + (m ? m->ws : 0);' % arena_al)
    w('}')
    w('')
    w('void %s_release(kern_ctx *ctx, %s_model *m) {' % (N, N))
    w('    int i;')
    w('    if (!m) return;')
    w('    for (i = 0; i < %s_N_PACKED; i++) kern_gemm_packed_b_free(ctx, m->pb[i]);' % U)
    w('    for (i = 0; i < %s_N_QWEIGHTS; i++) kern_qweight_free(ctx, m->qw[i]);' % U)
    w('    for (i = 0; i < %s_N_SPARSE24; i++) {' % U)
    w('        kern_sparse24_free(ctx, m->sw[i]);')
    w('        kern_gemm_packed_b_free(ctx, m->swd[i]);')
    w('    }')
    for j in range(len(low.ipacks)):
        w('    kern__free(ctx, m->ip[%d]);' % j)
        w('    kern_gemm_packed_b_free(ctx, m->ipt[%d]);' % j)
    for j in range(len(low.qipacks)):
        w('    kern__free(ctx, m->qp[%d]);' % j)
        w('    kern_qweight_free(ctx, m->qit[%d]);' % j)
    for j in range(len(low.merged)):
        w('    kern__free(ctx, m->mw[%d]);' % j)
    w('    memset(m, 0, sizeof *m);')
    w('}')
    w('')
    w('kern_status %s_prepare(kern_ctx *ctx, const void *const *weights, %s_model *m) {' % (N, N))
    w('    int i;')
    w('    kern_status st = KERN_OK;')
    w('    if (!m%s)' % (' || !weights' if low.weights else ''))
    w('        return kern__err(KERN_ERR_ARG, "%s_prepare: weights or m is NULL");' % N)
    w('    memset(m, 0, sizeof *m);')
    w('    for (i = 0; i < %s_N_WEIGHTS; i++) {' % U)
    w('        if (!weights[i]) {')
    w('            return kern__err(KERN_ERR_ARG, "%s_prepare: weight \'%%s\' is NULL",' % N)
    w('                             %s_weight_names[i]);' % N)
    w('        }')
    w('        m->w[i] = weights[i];')
    w('    }')
    for j, (v, srcs) in enumerate(low.merged):
        w('    /* %s: %s concatenated */' % (v.name.replace('*/', '* /'), ', '.join(
            x.name.replace('*/', '* /') for x in srcs)))
        emit_prepare_alloc(w, N, 'm->mw[%d]' % j, max(v.numel() * v.esize(), 1))
        off = 0
        for x in srcs:
            nb = x.numel() * x.esize()
            w('    memcpy((char *)m->mw[%d] + %d, m->w[%d], %d);' % (j, off, x.base[1], nb))
            off += nb
    for j, v in enumerate(low.packs):
        w('    { /* %s */' % v.name.replace('*/', '* /'))
        emit_pack_gemm(w, N, E, v, v.shape[0], v.shape[1], 'm->pb[%d]' % j, DTYPES[v.dtype][0], '        ')
        w('    }')
    for j, (v, sc, prune) in enumerate(low.qpacks):
        w('    { /* %s: int8 per output channel%s */' % (v.name.replace('*/', '* /'), ', 2:4 pruned here' if prune else ''))
        emit_pack_qweight(w, N, E, v, sc, v.shape[0], v.shape[1], 'm->qw[%d]' % j, '        ', prune)
        w('    }')
    for j, (v, prune) in enumerate(low.spacks):
        w('    { /* %s: 2:4 sparse%s */' % (v.name.replace('*/', '* /'), ', pruned here' if prune else ''))
        emit_pack_sparse24(w, N, E, v, prune, 'm->sw[%d]' % j, 'm->swd[%d]' % j, '        ')
        w('    }')
    for j, (wv, sc, qi) in enumerate(low.qipacks):
        Mi, Ni, Ki = low.qinstances[qi]
        qn = '%s__qi%d' % (N, qi)
        w('    /* %s: for the qlinear instance M=%d N=%d K=%d */' % (wv.name.replace('*/', '* /'), Mi, Ni, Ki))
        # AMX: kern_qlinear's int8 tiles instead (the same integer sums)
        w('    if (%s) {' % AMX_CTX)
        emit_pack_qweight(w, N, E, wv, sc, Ni, Ki, 'm->qit[%d]' % j, '        ')
        w('    } else {')
        emit_prepare_alloc(w, N, 'm->qp[%d]' % j, qlinear_packed_bytes(Ni, Ki), '        ')
        if sc is None:
            w('        {')
            w('            kern_tensor t;')
            w('            static const int64_t d[] = {%d, %d, %d, 1};' % (Ni, Ki, Ki))
            w('            %s__view(&t, %s, %s, 2, d);' % (N, E.base_expr(wv)[0], DTYPES[wv.dtype][0]))
            w('            st = %s__pack_t(ctx, &t, m->qp[%d]);' % (qn, j))
            emit_prepare_check(w, N, '            ')
            w('        }')
        else:
            w('        %s_pack_int8((const int8_t *)(const void *)%s, (const float *)(const void *)%s, m->qp[%d]);'
              % (qn, E.base_expr(wv)[0], E.base_expr(sc)[0], j))
        w('    }')
    for j, (wv, gi) in enumerate(low.ipacks):
        Mi, Ni, Ki, dti = low.instances[gi]
        ind = '    '
        if dti == 'bf16':
            # AMX: kern_gemm's bf16 tiles instead (docs/gen_models.md)
            w('    if (%s) {' % AMX_CTX)
            emit_pack_gemm(w, N, E, wv, Ni, Ki, 'm->ipt[%d]' % j, 'KERN_BF16', '        ')
            w('    } else {')
            ind = '        '
        emit_prepare_alloc(w, N, 'm->ip[%d]' % j, '%d * sizeof(float)' % (
            ((Ni + GEMM_NR - 1) // GEMM_NR) * Ki * GEMM_NR // (2 if dti == 'bf16' else 1)), ind, '(float *)')
        if dti == 'bf16':
            w(ind + '%s__gi%d_pack((const uint16_t *)(const void *)%s, (uint16_t *)(void *)m->ip[%d]);' % (
                N, gi, E.base_expr(wv)[0], j))
            w('    }')
        else:
            w(ind + '%s__gi%d_pack((const float *)(const void *)%s, m->ip[%d]);' % (
                N, gi, E.base_expr(wv)[0], j))
    for j, (v, srcs) in enumerate(low.merged):
        if len(v.shape) == 2 and j not in low.keep_merged:  # a weight: only its packed form is read
            w('    kern__free(ctx, m->mw[%d]);' % j)
            w('    m->mw[%d] = NULL;' % j)
    if ws_steps:
        w('    st = %s__ws_query(ctx, m, &m->ws);' % N)
        w('    if (st) {')
        w('        %s_release(ctx, m);' % N)
        w('        return st;')
        w('    }')
        w('    m->ws = (m->ws + 63) / 64 * 64;')
        w('    m->ws_threads = kern_ctx_threads(ctx);')
        w('    m->ws_isa = (int)kern_ctx_isa(ctx);')
    w('    (void)ctx;')
    w('    return st;')
    w('}')
    w('')
    emit_st_impl(w, low, N, U)
    w('')
    w('kern_status %s_run(kern_ctx *ctx, const %s_model *m, const void *const *inputs,' % (N, N))
    w('                   void *const *outputs, void *arena) {')
    w('    char *A = (char *)arena;')
    w('    kern_status st = KERN_OK;')
    if ws_steps:
        w('    void *W = NULL;   /* the kernels\' workspace (NULL: the context\'s scratch) */')
        w('    size_t WS = 0;')
    w('    if (!m%s || !outputs || (!arena && %s_arena_bytes(m)))' % (' || !inputs' if low.inputs else '', N))
    w('        return kern__err(KERN_ERR_ARG, "%s_run: m, inputs, outputs or arena is NULL");' % N)
    if ws_steps:
        w('    if (m->ws && kern_ctx_threads(ctx) == m->ws_threads && (int)kern_ctx_isa(ctx) == m->ws_isa) {')
        w('        W = A + %d;' % arena_al)
        w('        WS = m->ws;')
        w('    }')
    w('    (void)ctx;')
    w('    (void)A;')
    o.extend(body)
    w('    return st;')
    w('}')
    emit_impl_close(w, U)
    return '\n'.join(o) + '\n'


def write_atomic(path, text):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix='.' + os.path.basename(path) + '.', dir=d)
    try:
        with os.fdopen(fd, 'w') as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def cmd_model(args, argv):
    import hashlib
    try:
        with open(args.ir, 'rb') as f:
            raw = f.read()
    except OSError as e:
        raise GenError('cannot read %s: %s' % (args.ir, e.strerror))
    try:
        text = raw.decode('utf-8')
    except UnicodeDecodeError:
        raise GenError('%s is not UTF-8 text' % args.ir)
    name = args.name or c_ident(os.path.splitext(os.path.basename(args.out))[0])
    if not re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', name):
        raise GenError('--name %r is not a C identifier' % name)
    g = parse_ir(text, args.ir)
    bind = parse_bind(args.bind)
    passes = [p for p in PASSES if p not in (args.no_fuse or '').split(',')]
    if args.no_fuse == 'all':
        passes = []
    cache = None
    decide = None
    threads = args.threads or os.cpu_count() or 1
    if args.autotune:
        tpath = args.tune_cache or default_cache_path()
        cache = load_cache(tpath, cpu_key())
        if args.specialize_max_m:
            tlog = []
            decide = qkv_tuner(cache, tlog, args.specialize_max_m, threads)
    log = run_passes(g, bind, name, passes, args.quantize, decide, args.sparsify)
    if decide:
        log += tlog
    low = Lowering(g, bind, name, args.specialize_max_m,
                   da_tuner(cache, log, threads) if args.autotune and args.specialize_max_m else None)
    low.inst_cfg = {}
    low.qinst_cfg = {}
    if args.safetensors:
        bind_safetensors(low, args.safetensors)
    if args.autotune:
        for key in low.instances:
            low.inst_cfg[key] = tune_gemm(key[0], key[1], key[2], cache, log, key[3], threads)
        for key in low.qinstances:
            low.qinst_cfg[key] = tune_qlinear(key[0], key[1], key[2], cache, log, threads)
        if cache.pop('dirty', False):
            save_cache(tpath, cache)
    banner = ['command: kern_gen.py ' + ' '.join(argv),
              'input:   %s (sha256 %s)' % (os.path.basename(args.ir), hashlib.sha256(raw).hexdigest()),
              'binding: %s' % (', '.join('%s=%s' % (k, 'unbound (unused)' if v is None else v)
                                        for k, v in g.syms.items()) or '(none)')] + (
              ['weights: %s (safetensors, header fnv1a64 %016x)' % (
                  os.path.basename(args.safetensors), low.st['hash'])] if args.safetensors else []) + [
              'passes:  %s' % (', '.join(passes) or 'none')] + (
              ["quantize: '%s' (linears -> int8 dynamic qlinear)" % args.quantize]
              if args.quantize else []) + (
              ["sparsify: '%s' (linears -> 2:4 sparse24_linear, pruned at prepare)" % args.sparsify]
              if args.sparsify else []) + log + [
              'GEMM instances: %s' % (', '.join('%sM=%d N=%d K=%d' % (
                  'bf16 ' if k[3] == 'bf16' else '', k[0], k[1], k[2]) for k in low.instances) or 'none'),
              'qlinear instances: %s' % (', '.join('M=%d N=%d K=%d (mr=%d unroll=%d)' % (
                  k + tuple(low.qinst_cfg.get(k, QL_DEFAULT)[x] for x in ('mr', 'unroll')))
                  for k in low.qinstances) or 'none'),
              'norm instances: %s' % (', '.join('%s%s rows=%d H=%d eps=%.9g' % (
                  k[0], ' bf16 (weight %s)' % k[5] if k[4] == 'bf16' else '', k[1], k[2], k[3])
                  for k in low.norm_instances) or 'none'),
              'decode-attention instances: %s' % (', '.join(
                  'B=%d Lq=%d H=%d Hkv=%d D=%d Dv=%d Lmax=%d %s/%s split=%d' % (
                      k[:7] + (k[8], k[9], low.da_split[k]))
                  for k in low.da_instances) or 'none'),
              'nodes:   %d after the passes, %d steps' % (len(g.nodes), len(low.steps))]
    write_atomic(args.out, emit_model(low, name, banner))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog='kern_gen.py', description=__doc__.split('\n')[0])
    sub = ap.add_subparsers(dest='cmd')
    pm = sub.add_parser('model', help='a whole graph from its text IR')
    pm.add_argument('ir')
    pm.add_argument('--bind', default='')
    pm.add_argument('--name', default='')
    pm.add_argument('--no-fuse', default='', help="'all' or passes to skip: " + ','.join(PASSES))
    pm.add_argument('--specialize-max-m', type=int, default=0, metavar='M',
                    help='f32 and bf16 linears with at most M rows (and contiguous norms, '
                         'and decode_attention) through generated instances (another '
                         'summation order: within '
                         'tolerance of the executor, not bit for bit); 0 = off')
    pm.add_argument('--autotune', action='store_true', help='tune the GEMM instances here '
                    '(or replay them from --tune-cache)')
    pm.add_argument('--tune-cache', default='', help='default: ' + default_cache_path())
    pm.add_argument('--threads', type=int, default=0, metavar='T',
                    help='--autotune: the thread count to tune the instances\' thread split for '
                         '(default: this machine\'s CPUs)')
    pm.add_argument('--quantize', default='', metavar='GLOBS',
                    help="linears whose node name matches (comma-separated globs with * and ?, "
                         "'*' = all) become int8 dynamic qlinears, as the executor's "
                         "params.quantize")
    pm.add_argument('--sparsify', default='', metavar='GLOBS',
                    help="linears whose node name matches (and no --quantize glob) become "
                         "sparse24_linears, their weights pruned to 2:4 at prepare, as the "
                         "executor's params.sparsify")
    pm.add_argument('--safetensors', default='', metavar='FILE',
                    help='check the weights against this file and emit NAME_prepare_safetensors '
                         '(the weights at their offsets in it)')
    pm.add_argument('-o', '--out', required=True)
    pg = sub.add_parser('gemm', help='one GEMM instance: y = x . W^T (+ bias)')
    pg.add_argument('--m', type=int, required=True)
    pg.add_argument('--n', type=int, required=True)
    pg.add_argument('--k', type=int, required=True)
    pg.add_argument('--dtype', default='f32')
    pg.add_argument('--name', default='')
    pg.add_argument('--autotune', action='store_true', help='time candidate blockings here '
                    '(or replay them from --tune-cache)')
    pg.add_argument('--tune-cache', default='', help='default: ' + default_cache_path())
    pg.add_argument('--threads', type=int, default=0, metavar='T',
                    help='--autotune: the thread count to tune the thread split for '
                         '(default: this machine\'s CPUs)')
    pg.add_argument('--blocking', default='', metavar='MR,SPLIT,UNROLL[,TPT]',
                    help='a blocking by hand (what --autotune chooses among); TPT: column-panel '
                         'tasks per thread at --threads threads')
    pg.add_argument('-o', '--out', required=True)
    pn = sub.add_parser('norm', help='one norm instance: y = norm(x + residual) * weight + bias')
    pn.add_argument('--rows', type=int, required=True)
    pn.add_argument('--h', type=int, required=True)
    pn.add_argument('--kind', default='layer', help='layer or rms')
    pn.add_argument('--eps', type=float, default=None, help='default 1e-5 (kern_norm\'s)')
    pn.add_argument('--dtype', default='f32', help='f32 or bf16 (x, residual, y, residual_out)')
    pn.add_argument('--weight-dtype', default='', help='weight and bias: f32, or bf16 with --dtype '
                    'bf16 (default: --dtype)')
    pn.add_argument('--name', default='')
    pn.add_argument('-o', '--out', required=True)
    ps = sub.add_parser('sdpa', help='one attention instance (decode / GQA): y = softmax(q k^T s) v')
    ps.add_argument('--hq', type=int, required=True)
    ps.add_argument('--hkv', type=int, default=0, help='K/V heads (default: --hq)')
    ps.add_argument('--lq', type=int, default=1)
    ps.add_argument('--lk', type=int, required=True)
    ps.add_argument('--d', type=int, required=True)
    ps.add_argument('--causal', action='store_true')
    ps.add_argument('--scale', type=float, default=None, help='default 1/sqrt(D)')
    ps.add_argument('--dtype', default='f32')
    ps.add_argument('--name', default='')
    ps.add_argument('-o', '--out', required=True)
    pd = sub.add_parser('decode_attention', help='one decode-attention instance over a KV cache '
                        '(kern_decode_attention\'s rule)')
    pd.add_argument('--batch', type=int, default=1, help='sequences (default 1)')
    pd.add_argument('--lq', type=int, default=1, help='new query rows per sequence, 1..8 (default 1)')
    pd.add_argument('--h', type=int, required=True, help='query heads')
    pd.add_argument('--hkv', type=int, default=0, help='K/V heads (default: --h)')
    pd.add_argument('--d', type=int, required=True, help='head dim of q and k (a multiple of 8)')
    pd.add_argument('--dv', type=int, default=0, help='head dim of v (default: --d)')
    pd.add_argument('--lmax', type=int, required=True, help='the caches\' rows per sequence')
    pd.add_argument('--dtype', default='f32', help='q and y: f32 or bf16')
    pd.add_argument('--cache', default='', help='the caches: f32, bf16, f16 or i8 with row scales '
                    '(default: --dtype)')
    pd.add_argument('--lens', default='i32', help='k_lens: i32 or i64')
    pd.add_argument('--layout', default='bshd', help="the caches: 'bshd' [B, Lmax, Hkv, D] (kern's) "
                    "or 'bhsd' [B, Hkv, Lmax, D]")
    pd.add_argument('--scale', type=float, default=None, help='default 1/sqrt(D)')
    pd.add_argument('--split', type=int, default=0, help='cache rows per task: %s (default %d)' % (
        ', '.join(map(str, DA_SPLITS)), DA_SPLIT))
    pd.add_argument('--autotune', action='store_true', help='time the splits here (or replay '
                    'them from --tune-cache)')
    pd.add_argument('--tune-cache', default='', help='default: ' + default_cache_path())
    pd.add_argument('--threads', type=int, default=0, metavar='T',
                    help='--autotune: the thread count to tune for (default: this machine\'s CPUs)')
    pd.add_argument('--name', default='')
    pd.add_argument('-o', '--out', required=True)
    pq = sub.add_parser('qlinear', help='one int8 dynamic linear instance (kern_qlinear\'s bits)')
    pq.add_argument('--m', type=int, required=True)
    pq.add_argument('--n', type=int, required=True)
    pq.add_argument('--k', type=int, required=True)
    pq.add_argument('--name', default='')
    pq.add_argument('--blocking', default='', metavar='MR,UNROLL',
                    help='rows per tile (1..3) and the K unroll in 4-byte steps (1, 2, 4, 8)')
    pq.add_argument('--autotune', action='store_true', help='time the blockings here (or replay '
                    'them from --tune-cache)')
    pq.add_argument('--tune-cache', default='', help='default: ' + default_cache_path())
    pq.add_argument('--threads', type=int, default=0, metavar='T',
                    help='--autotune: the thread count to tune for (default: this machine\'s CPUs)')
    pq.add_argument('-o', '--out', required=True)
    args = ap.parse_args(argv)
    try:
        if args.cmd == 'model':
            cmd_model(args, argv)
        elif args.cmd == 'gemm':
            cmd_gemm(args, argv)
        elif args.cmd == 'norm':
            cmd_norm(args, argv)
        elif args.cmd == 'sdpa':
            cmd_sdpa(args, argv)
        elif args.cmd == 'decode_attention':
            if not args.cache:
                args.cache = args.dtype
            cmd_decode_attention(args, argv)
        elif args.cmd == 'qlinear':
            cmd_qlinear(args, argv)
        else:
            ap.print_usage(sys.stderr)
            return 2
    except GenError as e:
        sys.stderr.write('kern_gen.py: %s\n' % e)
        return 2
    return 0



# ------------------------------------------------------------------ passes
# The executor's fusion passes (kern_graph.h, kern__gpx_*), repeated on the
# IR so the generated code runs the same kernels in the same arithmetic
# order and its outputs equal kern_graph_run's bit for bit: DCE, epilogue
# (bias / act / residual / alpha / out_scale into linear and matmul),
# residual + norm, norm + GELU, DCE. Not repeated: the decomposed-pattern
# pass and the Q/K/V merge (compare with KERN_GRAPH_PASS_DECOMPOSED and
# _QKV off). Shapes are compared concretely (the executor compares
# symbolic dims): only a binding that makes two different expressions
# equal (L and P both 5) can fuse here where the executor does not.
PASSES = ('dce', 'epilogue', 'qkv', 'residual_norm', 'norm_act')
GEMM_ACTS = {'gelu': 'gelu', 'gelu_tanh': 'gelu_tanh', 'silu': 'silu', 'relu': 'relu'}
GELU_ACTS = {'gelu': 'gelu', 'gelu_tanh': 'gelu_tanh'}  # sparse24_linear's


def _pad(n):
    slots = OPS[n.op].split(',') if OPS[n.op] else []
    while len(n.ins) < len(slots):
        n.ins.append('-')


def _uses(g):
    u = {}
    for n in g.nodes:
        for a in n.ins:
            if a != '-':
                u[a] = u.get(a, 0) + 1
    for o, _ in g.outputs:
        u[o] = u.get(o, 0) + 1
    return u


def _consumer(g, v, uses, outs):
    if uses.get(v, 0) != 1 or v in outs:
        return None
    for n in g.nodes:
        if v in n.ins:
            return n
    return None


def pass_dce(g):
    live = set(o for o, _ in g.outputs)
    keep = []
    for n in reversed(g.nodes):
        # kv_append writes the caller's caches: kept, as the executor keeps it
        if n.op == 'kv_append' or any(o in live for o in n.outs):
            keep.append(n)
            live.update(a for a in n.ins if a != '-')
    removed = len(g.nodes) - len(keep)
    g.nodes = list(reversed(keep))
    return removed


def pass_epilogue(g, vals, consts, log):
    outs = set(o for o, _ in g.outputs)
    uses = _uses(g)
    for n in list(g.nodes):
        if n.op not in ('linear', 'matmul', 'qlinear', 'sparse24_linear') or n not in g.nodes:
            continue
        _pad(n)
        bs = 3 if n.op == 'qlinear' else 2  # bias slot; the residual's is next
        gemm = n.op in ('linear', 'matmul')  # alpha and out_scale: the gemm family only
        acts = GELU_ACTS if n.op == 'sparse24_linear' else GEMM_ACTS
        stage = 0
        if n.ins[bs] != '-':
            stage = 1
        if n.attrs.get('act', 'none') != 'none':
            stage = 2
        if n.ins[bs + 1] != '-':
            stage = 3
        if n.attrs.get('out_scale') and float(n.attrs['out_scale']) != 0:
            stage = 4
        if n.op != 'matmul' and n.attrs.get('glu') and int(n.attrs['glu']) and stage < 2:
            stage = 2  # bias and act act on the gate / up halves
        while True:
            y = n.outs[0]
            c = _consumer(g, y, uses, outs)
            yv = vals[y]
            if c is None or vals[c.outs[0]].dtype != yv.dtype:
                break
            if c.op == 'add' and vals[c.outs[0]].shape == yv.shape:
                t = c.ins[1] if c.ins[0] == y else c.ins[0]
                if t == y:
                    break
                tv = vals[t]
                if stage < 1 and len(tv.shape) == 1 and tv.shape[0] == yv.shape[-1] and \
                        is_float(tv.dtype):
                    n.ins[bs] = t
                    what, stage = 'bias', 1
                elif stage < 3 and is_float(tv.dtype) and bcast_shape(tv.shape, yv.shape) == yv.shape:
                    n.ins[bs + 1] = t
                    what, stage = 'residual', 3
                else:
                    break
            elif c.op in acts and stage < 2:
                n.attrs['act'] = c.op
                what, stage = c.op, 2
            elif gemm and stage < 4 and c.op in ('mul', 'div', 'scale'):
                k = None
                if c.op == 'mul':
                    t = c.ins[1] if c.ins[0] == y else c.ins[0]
                    k = consts.get(t)
                elif c.op == 'div' and c.ins[0] == y:
                    k = consts.get(c.ins[1])
                    k = None if not k else 1.0 / k
                elif c.op == 'scale':
                    k = float(c.attrs['alpha']) if 'alpha' in c.attrs else 1.0
                if k is None or k != k or k in (float('inf'), float('-inf')) or k == 0:
                    break
                if stage == 0:
                    a = float(n.attrs['alpha']) if 'alpha' in n.attrs else 1.0
                    n.attrs['alpha'] = repr(f32(a * k))
                    what = 'alpha'
                else:
                    n.attrs['out_scale'] = repr(f32(k))
                    what, stage = 'scale', 4
            else:
                break
            log.append("fuse: %s '%s' + %s -> '%s'" % (n.op, n.outs[0], what, c.outs[0]))
            n.outs = [c.outs[0]]
            # the fused node takes c's place when c comes later (as the
            # executor's absorb does): what c read besides n's output (a
            # residual) may be defined after n
            i_n, i_c = g.nodes.index(n), g.nodes.index(c)
            if i_c > i_n:
                g.nodes[i_c] = n
                del g.nodes[i_n]
            else:
                g.nodes.remove(c)


def _producer(g, v):
    for n in g.nodes:
        if v in n.outs:
            return n
    return None


def pass_qkv(g, vals, log, decide=None):
    """The executor's Q/K/V merge (kern__gpx_qkv): linears reading the same
    x whose weights (and biases, all or none) are graph weights of one
    dtype and K, none with a residual, act, alpha or out_scale, become one
    GEMM over the rows of their weights concatenated (in node order; the
    model builds the merged weight at prepare) and a split into views."""
    apart = set()
    for i, a in enumerate(list(g.nodes)):
        if a not in g.nodes or a.op not in ('linear', 'qlinear'):
            continue
        _pad(a)
        q8 = a.op == 'qlinear'
        bs = 3 if q8 else 2  # bias slot; the residual's is next
        wa = vals[a.ins[1]]
        if q8 and (wa.dtype == 'i8' or a.ins[2] != '-'):
            continue  # already int8: its codes and scales are the caller's
        has_bias = a.ins[bs] != '-'
        grp = []
        for b in g.nodes[g.nodes.index(a):]:
            if len(grp) >= 8:
                break
            if b.op != a.op or b.ins[0] != a.ins[0] or (q8 and b.ins[2] != '-'):
                continue
            _pad(b)
            wb = vals[b.ins[1]]
            if (wb.kind != 'weight' or wb.dtype != wa.dtype or len(wb.shape) != 2 or
                    len(wa.shape) != 2 or wb.shape[1] != wa.shape[1] or b.ins[bs + 1] != '-' or
                    b.attrs.get('act', 'none') != 'none' or 'alpha' in b.attrs or
                    int(b.attrs.get('glu', 0) or 0) or
                    float(b.attrs.get('out_scale', 0) or 0) != 0 or
                    int(b.attrs.get('prune', 0) or 0) != int(a.attrs.get('prune', 0) or 0) or
                    (b.ins[bs] != '-') != has_bias):
                continue
            if has_bias and (vals[b.ins[bs]].kind != 'weight' or
                             vals[b.ins[bs]].dtype != vals[a.ins[bs]].dtype):
                continue
            grp.append(b)
        if len(grp) < 2 or wa.kind != 'weight':
            continue
        if decide and not q8:  # --autotune: the merge is a fusion choice, timed
            if a in apart:
                continue  # a member of a group kept apart: no smaller merge either
            rows = functools_prod(vals[a.ins[0]].shape[:-1])
            if not decide(rows, wa.shape[1], [vals[b.ins[1]].shape[0] for b in grp], wa.dtype):
                log.append("autotune: %d linears reading '%s' (%s) kept apart: faster than one GEMM" % (
                    len(grp), a.ins[0], ', '.join("'%s'" % b.outs[0] for b in grp)))
                apart.update(grp)
                continue
        ntot = sum(vals[b.ins[1]].shape[0] for b in grp)
        base = a.outs[0]
        wname = fresh(g, base + '.merged_weight')
        g.merged.append((wname, wa.dtype, [str(ntot), str(wa.shape[1])], [b.ins[1] for b in grp]))
        bname = '-'
        if has_bias:
            bname = fresh(g, base + '.merged_bias')
            g.merged.append((bname, vals[a.ins[bs]].dtype, [str(ntot)], [b.ins[bs] for b in grp]))
        mname = fresh(g, base + '.merged')
        at = g.nodes.index(grp[0])
        m = Node(grp[0].line, [mname], a.op,
                 [a.ins[0], wname, '-', bname, '-'] if q8 else [a.ins[0], wname, bname, '-'],
                 {'prune': '1'} if int(a.attrs.get('prune', 0) or 0) else {})
        s = Node(grp[0].line, [b.outs[0] for b in grp], 'split', [mname],
                 {'axis': '-1', 'sizes': ','.join(str(vals[b.ins[1]].shape[0]) for b in grp)})
        for b in grp:
            g.nodes.remove(b)
        g.nodes[at:at] = [m, s]
        log.append("fuse: %d %ss reading '%s' (%s) -> one GEMM '%s' [%d outputs]" % (
            len(grp), a.op, a.ins[0], ', '.join("'%s'" % b.outs[0] for b in grp), mname, ntot))


def fresh(g, name):
    taken = set(n for n, *_ in g.inputs) | set(n for n, *_ in g.weights) | \
        set(c[0] for c in g.consts) | set(m[0] for m in g.merged) | \
        set(o for n in g.nodes for o in n.outs)
    out, k = name, 1
    while out in taken:
        out = '%s.%d' % (name, k)
        k += 1
    return out


def pass_residual_norm(g, vals, log):
    uses = _uses(g)
    for n in list(g.nodes):
        if n.op not in ('layer_norm', 'rms_norm') or len(n.outs) != 1:
            continue
        _pad(n)
        if n.ins[3] != '-':
            continue
        s = n.ins[0]
        ad = _producer(g, s)
        if ad is None or ad.op != 'add' or ad.ins[0] == ad.ins[1]:
            continue
        a0, a1 = vals[ad.ins[0]], vals[ad.ins[1]]
        sv = vals[s]
        if a0.shape != sv.shape or a1.shape != sv.shape or a0.dtype != sv.dtype or \
                a1.dtype != sv.dtype:
            continue
        n.ins[0], n.ins[3] = ad.ins[0], ad.ins[1]
        if uses.get(s, 0) > 1:
            n.outs = [n.outs[0], s]
            g.nodes.remove(n)
            g.nodes[g.nodes.index(ad)] = n
            log.append("fuse: add '%s' + %s '%s' (the sum is its second output)" % (
                s, n.op, n.outs[0]))
        else:
            g.nodes.remove(ad)
            log.append("fuse: add '%s' + %s '%s'" % (s, n.op, n.outs[0]))


def pass_norm_act(g, vals, log):
    outs = set(o for o, _ in g.outputs)
    uses = _uses(g)
    for n in list(g.nodes):
        if n.op not in ('layer_norm', 'rms_norm') or n.attrs.get('act', 'none') != 'none':
            continue
        c = _consumer(g, n.outs[0], uses, outs)
        if c is None or c.op not in ('gelu', 'gelu_tanh') or \
                vals[c.outs[0]].dtype != vals[n.outs[0]].dtype:
            continue
        n.attrs['act'] = c.op
        n.outs[0] = c.outs[0]
        g.nodes.remove(c)
        log.append("fuse: %s '%s' + %s" % (n.op, n.outs[0], c.op))


def glob_match(pats, s):
    """The executor's node-name patterns (kern__g_glob): comma-separated
    globs, '*' any run of characters, '?' one character, nothing else
    special; each matched against the whole name."""
    for p in pats.split(','):
        rx = ''.join('.*' if ch == '*' else '.' if ch == '?' else re.escape(ch) for ch in p)
        if re.fullmatch(rx, s, re.S):
            return True
    return False


def pass_quantize(g, vals, pats, log, spats=''):
    """The executor's transforms (kern__gpx_transforms with
    params.quantize and params.sparsify): a linear whose name matches
    pats, whose weight is a graph weight and whose epilogue int8 has (no
    alpha, no out_scale) and whose x is f32/bf16 becomes a qlinear (int8
    dynamic; matching spats too, with K a multiple of 4: prune=1, the
    weight pruned 2:4 before it is quantized); else one whose name matches
    spats, with a graph weight, no
    alpha, out_scale or glu, act none / gelu / gelu_tanh and K a multiple
    of 4 becomes a sparse24_linear pruned at prepare; the rest are
    reported."""
    for n in g.nodes:
        if n.op != 'linear':
            continue
        q = bool(pats) and glob_match(pats, n.outs[0])
        sp = bool(spats) and glob_match(spats, n.outs[0])
        if not q and not sp:
            continue
        _pad(n)
        nm = n.outs[0]
        wv, xv = vals[n.ins[1]], vals[n.ins[0]]
        what = 'quantize' if q else 'sparsify'
        if wv.kind != 'weight':
            log.append("no %s: '%s': the weight is computed, not a graph weight" % (what, nm))
            continue
        if q and sp and wv.shape[-1] % 4:
            log.append("no sparsify: '%s': K=%d is not a multiple of 4 (quantized only)" % (nm, wv.shape[-1]))
            sp = False
        both = q and sp
        sp = sp and not q
        act = n.attrs.get('act', 'none')
        glu = int(n.attrs.get('glu', 0) or 0)
        if 'alpha' in n.attrs or float(n.attrs.get('out_scale', 0) or 0) != 0 or \
                (sp and (glu or act not in ('none', 'gelu', 'gelu_tanh'))):
            log.append("no %s: '%s': %s%s / alpha / out_scale have no %s epilogue" % (
                what, nm, 'glu, act ' if glu else 'act ', act, 'int8' if q else '2:4'))
            continue
        if sp:
            if len(wv.shape) != 2 or wv.shape[1] % 4:
                log.append("no sparsify: '%s': K=%d is not a multiple of 4" % (nm, wv.shape[-1]))
                continue
            n.op = 'sparse24_linear'
            n.attrs = {'act': act, 'prune': '1'} if act != 'none' else {'prune': '1'}
            log.append("sparsify: '%s' -> sparse24_linear" % nm)
            continue
        if xv.dtype not in ('f32', 'bf16'):
            log.append("no quantize: '%s': x is %s" % (nm, xv.dtype))
            continue
        if wv.dtype not in ('f32', 'bf16'):
            log.append("no quantize: '%s': weight must be f32, bf16 or i8" % nm)
            continue
        n.op = 'qlinear'
        n.ins = [n.ins[0], n.ins[1], '-', n.ins[2], n.ins[3]]
        n.attrs = {k: v for k, v in n.attrs.items() if k in ('act', 'glu')}
        if both:
            n.attrs['prune'] = '1'
            log.append("quantize+sparsify: '%s' -> qlinear (2:4 pruned at plan time)" % nm)
        else:
            log.append("quantize: '%s' -> qlinear" % nm)


def run_passes(g, bind, name, passes, quantize='', qkv_decide=None, sparsify=''):
    log = []
    # every node checked first, the dead ones too (the executor checks
    # each node as it is added)
    Lowering(g, bind, name)
    if 'dce' in passes:
        r = pass_dce(g)
        if r:
            log.append('dce: removed %d dead nodes' % r)

    def shapes():
        low = Lowering(g, bind, name)
        return low.vals, {v.name: vals[0] for v, vals in low.consts if len(vals) == 1}
    if quantize or sparsify:
        vals, _ = shapes()
        pass_quantize(g, vals, quantize, log, sparsify)
    if 'epilogue' in passes:
        vals, consts = shapes()
        pass_epilogue(g, vals, consts, log)
    if 'qkv' in passes:
        vals, _ = shapes()
        pass_qkv(g, vals, log, qkv_decide)
    if 'residual_norm' in passes:
        vals, _ = shapes()
        pass_residual_norm(g, vals, log)
    if 'norm_act' in passes:
        vals, _ = shapes()
        pass_norm_act(g, vals, log)
    if 'dce' in passes:
        r = pass_dce(g)
        if r:
            log.append('dce: removed %d nodes the fusions left unused' % r)
    return log



# ------------------------------------------------------ standalone kernels
GEMV_M = 8    # the executor's KERN__G_GEMV_M: linears of at most 8 rows stream their weight
GEMM_NR = 16  # columns per packed panel (two 8-float AVX2 vectors)
GEMM_MR = 6   # rows per micro-tile (12 accumulators + 2 B vectors)


GEMM_DEFAULT = {'mr': 6, 'split': 3, 'unroll': 4}


def emit_banner(w, name, banner):
    """A standalone header's first comment lines: its name and the
    generator's banner (the comment goes on after them)."""
    w('/* %s.h -- generated by gen/kern_gen.py; do not edit.' % name)
    for b in banner:
        w(' *   %s' % b)
    w(' *')


def emit_impl_open(w, U, x86=True):
    """Ends a header's declarations and opens its implementation section
    (once per program, the headers it uses; <immintrin.h> when x86)."""
    w('#endif /* %s_H */' % U)
    w('')
    w('#ifdef %s_IMPLEMENTATION' % U)
    w('#ifndef %s_IMPLEMENTED' % U)
    w('#define %s_IMPLEMENTED' % U)
    w('#include <math.h>')
    w('#include <string.h>')
    if x86:
        w('#ifdef KERN_X86')
        w('#include <immintrin.h>')
        w('#endif')


def emit_impl_close(w, U):
    """Closes what emit_impl_open opened."""
    w('#endif /* %s_IMPLEMENTED */' % U)
    w('#endif /* %s_IMPLEMENTATION */' % U)


def isa_begin(w, isa, target=True):
    """Opens one ISA's copy of an emitted function: a blank line, and for
    the AVX2 copy the x86 guard (and the AVX2 target attribute)."""
    w('')
    if isa in ('avx2', 'avx512', 'vnni'):
        w('#ifdef KERN_X86')
        if target:
            w({'avx2': 'KERN_TARGET_AVX2', 'avx512': 'KERN_TARGET_AVX512',
               'vnni': 'KERN_TARGET_AVX512VNNI'}[isa])


def isa_end(w, isa):
    """Closes what isa_begin opened."""
    if isa in ('avx2', 'avx512', 'vnni'):
        w('#endif')


# The x86 bodies of the GEMM instances: AVX2 (two 8-float vectors a panel
# row) and AVX-512 (one 16-float vector a panel row), each with the scalar
# twin's k order for every output, so all three give the same bits. The
# AVX-512 one runs at the KERN_ISA_AVX512 levels and up (x86).
GEMM_ISAS = ('scalar', 'avx2', 'avx512')


def emit_isa_dispatch(w, call, ret=False):
    """The context's ISA picks a body: call(isa) is the C call; ret: each
    x86 branch returns after its call (else one if/else chain ending in
    the scalar call)."""
    w('#ifdef KERN_X86')
    w('    if (kern_ctx_isa(a->ctx) >= KERN_ISA_AVX512 && kern_ctx_isa(a->ctx) < KERN_ISA_NEON)%s' % (' {' if ret else ''))
    w('        %s;' % call('avx512'))
    if ret:
        w('        return;')
        w('    }')
        w('    if (kern_ctx_isa(a->ctx) >= KERN_ISA_AVX2 && kern_ctx_isa(a->ctx) < KERN_ISA_NEON) {')
        w('        %s;' % call('avx2'))
        w('        return;')
        w('    }')
        w('#endif')
    else:
        w('    else if (kern_ctx_isa(a->ctx) >= KERN_ISA_AVX2 && kern_ctx_isa(a->ctx) < KERN_ISA_NEON)')
        w('        %s;' % call('avx2'))
        w('    else')
        w('#endif')
    w('        %s;' % call('scalar') if not ret else '    %s;' % call('scalar'))


def emit_panel_split(w, name, NP, tpt):
    """NAME__task over NP column panels on the context's threads, about tpt
    tasks a thread, each a run of whole panels (so the bits do not depend
    on the split); one call in the caller's thread when that is one task.
    Sets st (the caller declares it) and leaves a.per set."""
    w('    {')
    w('        int nt = kern_ctx_threads(ctx);')
    w('        int64_t tpt = %s;' % tpt)
    w('        int64_t ntask = (int64_t)nt * tpt < %d ? (int64_t)nt * tpt : %d;' % (NP, NP))
    w('        if (nt <= 1 || ntask <= 1) {')
    w('            a.per = %d;' % NP)
    w('            %s__task(&a, 0, 0);' % name)
    w('        } else {')
    w('            a.per = (%d + ntask - 1) / ntask;' % NP)
    w('            st = kern_parallel_for(ctx, (%d + a.per - 1) / a.per, %s__task, &a);' % (NP, name))
    w('        }')
    w('    }')


def emit_task_epilogue(w, M, N, NR, alpha):
    """The end of a panel task: kern_gemm's epilogue on the columns of its
    panels [p0, p1) of NR columns, all M rows of y (f32, row stride N)."""
    w('    if (a->epi)')
    w('        kern__epilogue_apply_f32(a->ctx, a->y, %d, %d, p0 * %d, (p1 * %d < %d ? p1 * %d : %d) - p0 * %d,'
      % (N, M, NR, NR, N, NR, N, NR))
    w('                                 %s, a->epi);' % alpha)


def tpt_expr(cfg):
    """C expression of the column-panel tasks per thread (nt: the
    context's threads): the tuned split at the thread count it was tuned
    for, TPT_DEFAULT otherwise."""
    t, n = cfg.get('tpt'), cfg.get('tpt_threads')
    if t and n and t != TPT_DEFAULT:
        return '(nt == %d ? %d : %d)' % (n, t, TPT_DEFAULT)
    return '%d' % TPT_DEFAULT


def gemm_rows(M, mr):
    """The M split: ceil(M / mr) tiles of nearly equal row counts."""
    nb = (M + mr - 1) // mr
    rows, m = [], 0
    for i in range(nb):
        r = M // nb + (1 if i < M % nb else 0)
        rows.append((m, r))
        m += r
    return rows


def emit_gemm(name, M, N, K, banner, impl_only=False, cfg=None, dt='f32'):
    """y[M,N] = x[M,K] . W[N,K]^T (+ bias) with W packed once into panels of
    16 columns, k-major, and x copied per call into the row tiles' layout.
    Every size a constant; one micro-kernel per row count of the M split
    (cfg mr rows at most) and K block (gemm_kblock), K unrolled cfg unroll
    times, the next panel prefetched; tiles of at most cfg split rows keep
    two accumulator sets (even and odd k) to hide the FMA latency. The
    AVX-512 and AVX2 kernels and their scalar twin (fmaf, same order) give
    the same bits. dt 'bf16': emit_gemm_bf16's instance."""
    cfg = cfg or GEMM_DEFAULT
    U = name.upper()
    NP = (N + GEMM_NR - 1) // GEMM_NR
    rows = gemm_rows(M, cfg['mr'])
    o = []
    w = o.append
    sto = 'static ' if impl_only else ''
    if impl_only:
        w('')
        w('/* GEMM instance %sM=%d N=%d K=%d (kern_gen.py gemm) */' % ('bf16 ' if dt == 'bf16' else '', M, N, K))
    if dt == 'bf16':
        emit_gemm_bf16(w, name, U, M, N, K, NP, rows, sto, cfg, not impl_only, banner)
    else:
        if not impl_only:
            emit_gemm_head(w, name, U, M, N, K, NP, banner, len(rows))
        emit_gemm_impl(w, name, U, M, N, K, NP, rows, sto, cfg)
    if not impl_only:
        emit_impl_close(w, U)
    return '\n'.join(o) + '\n'


def emit_gemm_head(w, name, U, M, N, K, NP, banner, ntiles=1):
    emit_banner(w, name, banner)
    w(' * y[%d,%d] = x[%d,%d] . W^T (+ bias), W [%d,%d] row-major (a torch Linear' % (M, N, M, K, N, K))
    w(' * weight) packed once by %s_pack into %s_PACKED_FLOATS floats (64-byte' % (name, U))
    KC = gemm_kblock(M, K, ntiles)
    w(' * aligned); f32. x is copied into the row tiles\' layout in the context\'s')
    w(' * workspace%s; the column panels split over its threads (the same bits' % (
        ', K runs in blocks of %d' % KC if KC < K else ''))
    w(' * on any thread count); the ISA is the context\'s (AVX-512, AVX2+FMA or')
    w(' * the scalar twin, which give the same bits). */')
    w('#ifndef %s_H' % U)
    w('#define %s_H' % U)
    w('#include "kern.h"')
    w('#define %s_M %d' % (U, M))
    w('#define %s_N %d' % (U, N))
    w('#define %s_K %d' % (U, K))
    w('#define %s_PACKED_FLOATS ((size_t)%d)' % (U, NP * K * GEMM_NR))
    w('void %s_pack(const float *w, float *packed);' % name)
    w('kern_status %s_run(kern_ctx *ctx, const float *x, const float *packed, const float *bias,' % name)
    w('                   float *y);')
    emit_impl_open(w, U)


# The loop nest of the f32 instances (the bf16 twin shares the first and
# last point):
# * x is copied once per call into the row tiles' layout (tile (m0, r) at
#   m0 K, k-major, its r rows' values of one k adjacent), so a tile reads
#   one sequential stream instead of r rows K floats apart;
# * while the row tiles run on a panel, each prefetches its share of the
#   next panel (one line per unrolled step), so the weight, read once from
#   DRAM, arrives while the FMAs run: the hardware prefetchers stop at
#   every 4 KiB page, and the first tile of a panel used to wait for it;
# * an x past GEMM_X_L2 bytes (M = 64, K = 4096: 1 MiB) is taken in K
#   blocks of KC (gemm_kblock: KC x M floats of x, 256 KiB, half the L2),
#   the K-block loop outermost: a block of x is read from L2 across all
#   the panels of a task, a panel's block (KC x 16 floats, 64 KiB at KC =
#   1024) from L2 across the row tiles; y holds the partial sums between
#   blocks. Set 0 of the accumulators restarts from y, so a one-set tile
#   sums every k in one chain as with one block (the same bits); a two-set
#   tile adds its sets at each block end (another order).
# Measured on the Zen 3 of docs/gen_models.md (N = K = 4096, one thread,
# the variants in turn in one process, medians of 21 calls at load 1.5-3):
# at M = 64 the prefetch took 2-3 ms off 28-31 ms, the x layout about 2 ms
# more; K blocks of 1024 or 2048 were level with one block of 4096 (an x
# read from L3 per panel keeps up while the L3 is not contended), blocks
# of 512 about 1 ms slower (the y reload and store at each block end). The
# layout and prefetch took M = 1 from 3.3-3.4 to 2.8 ms, M = 4 from 3.9-4.7
# to 3.3-3.5 ms and M = 16 from 8.0-8.2 to 6.4-6.6 ms.
GEMM_X_L2 = 256 * 1024  # bytes of x (M x K f32) per K block, and the most an instance leaves unblocked
GEMM_KC_MIN = 256       # no K block shorter than this (each costs a y reload and store per tile)
# A panel's K run is read once by each row tile in turn: past the L1 (K =
# 3072: 192 KiB a panel) every tile after the first reads it from L2 and
# the weight stream waits on them. So with several tiles K also runs in
# blocks of at most GEMM_PANEL_L1 bytes of a panel (256 k: 16 KiB, two
# panels' 32 KiB for the AVX-512 pair kernel). Xeon (family 6 model 0xa7),
# one thread, the weights cycled through 12 copies, us, no L1 blocks ->
# blocks of 32 KiB -> 16 KiB (two panels at once on AVX-512 with the 16
# KiB ones): M 16 x N 768 x K 3072 1150-1205 -> 968-980 -> 745-748 (the
# pair kernel with 32 KiB blocks: 773-800); 16 x 3072 x 768 1102-1197 ->
# 886-968 -> 681-724; 32 x 768 x 3072 1222-1273 -> 1113-1133 (16 KiB);
# 64 x 3072 x 768 2154-2201 -> 2128-2147. Up to GEMM_PANEL_L1_TILES tiles
# only: on the Zen 3 at M = 64 (11 tiles) blocks of 256 were slower than
# of 1024 (the y reload and store at each block end, above).
GEMM_PANEL_L1 = 16 * 1024
GEMM_PANEL_L1_TILES = 6

# The next block's lines are hinted into L2 while a block runs: each
# unrolled step of a micro-kernel hints one line of each of its parts of
# the next block (a block's lines in U4 parts for f32, U4 / 2 for bf16: a
# line is two bf16 k-rows). The whole next block, in this order: the
# first row tile hints the parts the other tiles do not take, each other
# tile one (past the parts: none). Before, one part a tile, so three
# tiles left a quarter of every f32 block to the prefetchers. Xeon
# (family 6 model 0xa7), 16 x 3072 x 768 (M 16: tiles of 6, 5, 5), the
# weights cycled through 24 copies, min of 4 alternated runs, us, 1 / 2
# threads: parts (0), (1), (2) 750 / 374; (0, 1), (2), (3) 705 / 344;
# (0, 3), (1), (2) 719 / 350; (0, 1, 2), (3), () 777 / 377; (0, 1), (2,
# 3), () 808 / 369; (0, 1), (2), (3) two panels ahead 717 / 356; every
# tile hinting two lines a step at 1 / 2 the rate (all parts by the
# second tile) 824 / (not run).
def gemm_pf_parts(ntiles, nparts):
    """Each row tile's (first part, number of parts) of the next block's
    hints (see above)."""
    if ntiles >= nparts:
        return [(i, 1) if i < nparts else (0, 0) for i in range(ntiles)]
    c0 = nparts - ntiles + 1
    return [(0, c0)] + [(c0 + i - 1, 1) for i in range(1, ntiles)]


def gemm_pf_sfx(npf, isa='avx2'):
    """A micro-kernel's name suffix for npf parts of hints (none for one,
    and for the scalar twin, which hints nothing)."""
    return '' if npf == 1 or isa == 'scalar' else '_pf%d' % npf


def gemm_kblock(M, K, ntiles=1):
    """The K block of an instance: K itself (one block) while x's M x K
    floats fit GEMM_X_L2 bytes or K is under two GEMM_KC_MIN blocks; else
    K in ceil(x bytes / GEMM_X_L2) nearly equal blocks (at most K /
    GEMM_KC_MIN), rounded up to a multiple of 8 so that every unroll
    divides all blocks but the last, which is shorter. With 2 to
    GEMM_PANEL_L1_TILES row tiles (ntiles) a panel's block also stays
    within GEMM_PANEL_L1 bytes (see there)."""
    nkb = (M * K * 4 + GEMM_X_L2 - 1) // GEMM_X_L2
    if 1 < ntiles <= GEMM_PANEL_L1_TILES:
        nkb = max(nkb, (K * GEMM_NR * 4 + GEMM_PANEL_L1 - 1) // GEMM_PANEL_L1)
    nkb = min(nkb, K // GEMM_KC_MIN)
    if nkb < 2:
        return K
    return ((K + nkb - 1) // nkb + 7) // 8 * 8


def emit_gemm_xpack(w, M, K, rows, src, conv, dst):
    """The copy of x [M,K] (src, elements converted by the C expression
    format conv) into the tiles' layout at xp: tile (m0, r) from m0 K on,
    its (i, k) at m0 K + k r + i."""
    nb = len(rows)
    r0, extra = M // nb, M % nb
    for t0, t1, r, base in ((0, extra, r0 + 1, 0), (extra, nb, r0, extra * (r0 + 1))):
        if t1 <= t0:
            continue
        w('    for (int64_t t = %d; t < %d; t++) {' % (t0, t1))
        w('        const int64_t m0 = %s;' % ('t * %d' % r if base == t0 * r else '%d + (t - %d) * %d' % (base, t0, r)))
        w('        for (int64_t k = 0; k < %d; k++)' % K)
        w('            for (int i = 0; i < %d; i++) %s[m0 * %d + k * %d + i] = %s;'
          % (r, dst, K, r, conv % ('%s[(m0 + i) * %d + k]' % (src, K))))
        w('    }')


def emit_gemm_pf(w, base, npf, part, step):
    """An unrolled step's hints: one line of each of npf parts (part
    elements apart) from base, step elements a step of k."""
    for j in range(npf):
        w('        _mm_prefetch((const char *)(%s + %sk * %d), _MM_HINT_T1);' % (base, '%d + ' % (j * part) if j else '', step))


def emit_gemm_pf_void(w, full, npf):
    """Mark pf used where no hint reads it: no unrolled loop (full == 0)
    or no parts (npf == 0: a row tile past the parts)."""
    if not full or not npf:
        w('    (void)pf;')


def emit_gemm_mk(w, name, N, r, sets, isa, U4, kn, reload, npf=1):
    """The r-row micro-kernel of an f32 instance on one ISA over one K
    block of kn steps: x the tile's block in the tiles' layout, set 0 of
    the accumulators starting from y unless first (only when reload: K in
    more than one block; set 1 from zero), y = acc (+ bias, passed on the
    last block only), and one line of each of npf parts of pf (the next
    panel's block, gemm_pf_parts) hinted per unrolled step."""
    isa_begin(w, isa)
    w('static void %s__mk%d_k%d_%s%s(const float *x, const float *bp, const float *bias, float *y,'
      % (name, r, kn, isa, gemm_pf_sfx(npf, isa)))
    w('                         int64_t ncols, int first, const float *pf) {')
    if isa != 'scalar':
        # the accumulator vectors of a panel row: AVX2 two (c{s}_{i}_0 and
        # _1, columns 0-7 and 8-15), AVX-512 one (c{s}_{i})
        vt, vp = ('__m256', '_mm256') if isa == 'avx2' else ('__m512', '_mm512')
        parts = (('_0', 0), ('_1', 8)) if isa == 'avx2' else (('', 0),)
        for s in range(sets):
            for i in range(r):
                w('    %s %s;' % (vt, ', '.join('c%d_%d%s = %s_setzero_ps()' % (s, i, sf, vp) for sf, _ in parts)))
        w('    float t[%d][%d];' % (r, GEMM_NR))
        if not reload:
            w('    (void)first;')
        else:
            w('    if (!first && ncols == %d) {' % GEMM_NR)
            for i in range(r):
                for sf, o in parts:
                    w('        c0_%d%s = %s_loadu_ps(y + %d);' % (i, sf, vp, i * N + o))
            w('    } else if (!first) {')
            w('        memset(t, 0, sizeof t);')
            w('        for (int i = 0; i < %d; i++)' % r)
            w('            for (int64_t j = 0; j < ncols; j++) t[i][j] = y[i * %d + j];' % N)
            for i in range(r):
                for sf, o in parts:
                    w('        c0_%d%s = %s_loadu_ps(t[%d]%s);' % (i, sf, vp, i, ' + %d' % o if o else ''))
            w('    }')
    else:
        w('    float c[%d][%d][%d], t[%d][%d];' % (sets, r, GEMM_NR, r, GEMM_NR))
        w('    memset(c, 0, sizeof c);')
        w('    (void)pf;')
        if not reload:
            w('    (void)first;')
        else:
            w('    if (!first)')
            w('        for (int i = 0; i < %d; i++)' % r)
            w('            for (int64_t j = 0; j < ncols; j++) c[0][i][j] = y[i * %d + j];' % N)

    def xat(i, kexpr):
        return '(%s) * %d + %d' % (kexpr, r, i)

    def kstep(kexpr, s):
        L = []
        if isa == 'avx2':
            L.append('{')
            L.append('    const __m256 b0 = _mm256_loadu_ps(bp + (%s) * %d), b1 = _mm256_loadu_ps(bp + (%s) * %d + 8);' % (kexpr, GEMM_NR, kexpr, GEMM_NR))
            for i in range(r):
                L.append('    { const __m256 a = _mm256_broadcast_ss(x + %s); c%d_%d_0 = _mm256_fmadd_ps(a, b0, c%d_%d_0); c%d_%d_1 = _mm256_fmadd_ps(a, b1, c%d_%d_1); }' % (xat(i, kexpr), s, i, s, i, s, i, s, i))
            L.append('}')
        elif isa == 'avx512':
            L.append('{')
            L.append('    const __m512 b = _mm512_loadu_ps(bp + (%s) * %d);' % (kexpr, GEMM_NR))
            for i in range(r):
                L.append('    c%d_%d = _mm512_fmadd_ps(_mm512_set1_ps(x[%s]), b, c%d_%d);' % (s, i, xat(i, kexpr), s, i))
            L.append('}')
        else:
            L.append('{')
            L.append('    const float *b = bp + (%s) * %d;' % (kexpr, GEMM_NR))
            for i in range(r):
                L.append('    { const float a = x[%s]; for (int j = 0; j < %d; j++) c[%d][%d][j] = fmaf(a, b[j], c[%d][%d][j]); }' % (xat(i, kexpr), GEMM_NR, s, i, s, i))
            L.append('}')
        return L
    KN = kn
    full = KN // U4
    if full:
        w('    for (int64_t k = 0; k < %d; k += %d) {' % (full * U4, U4))
        if isa != 'scalar':
            emit_gemm_pf(w, 'pf', npf, full * GEMM_NR, GEMM_NR // U4)
        for u in range(U4):
            for line in kstep('k + %d' % u, (u % sets)):
                w('        ' + line)
        w('    }')
    if isa != 'scalar':
        emit_gemm_pf_void(w, full, npf)
    for k in range(full * U4, KN):
        for line in kstep('%d' % k, (k % sets)):
            w('    ' + line)
    if isa == 'avx2':
        # a whole panel straight to y (the bias add as t + bias below)
        w('    if (ncols == %d) {' % GEMM_NR)
        for i in range(r):
            for h in (0, 1):
                v = '_mm256_add_ps(c0_%d_%d, c1_%d_%d)' % (i, h, i, h) if sets == 2 else 'c0_%d_%d' % (i, h)
                w('        _mm256_storeu_ps(y + %d, bias ? _mm256_add_ps(%s, _mm256_loadu_ps(bias + %d)) : %s);'
                  % (i * N + 8 * h, v, 8 * h, v))
        w('        return;')
        w('    }')
        for i in range(r):
            if sets == 2:
                w('    _mm256_storeu_ps(t[%d], _mm256_add_ps(c0_%d_0, c1_%d_0));' % (i, i, i))
                w('    _mm256_storeu_ps(t[%d] + 8, _mm256_add_ps(c0_%d_1, c1_%d_1));' % (i, i, i))
            else:
                w('    _mm256_storeu_ps(t[%d], c0_%d_0);' % (i, i))
                w('    _mm256_storeu_ps(t[%d] + 8, c0_%d_1);' % (i, i))
    elif isa == 'avx512':
        w('    if (ncols == %d) {' % GEMM_NR)
        for i in range(r):
            v = '_mm512_add_ps(c0_%d, c1_%d)' % (i, i) if sets == 2 else 'c0_%d' % i
            w('        _mm512_storeu_ps(y + %d, bias ? _mm512_add_ps(%s, _mm512_loadu_ps(bias)) : %s);' % (i * N, v, v))
        w('        return;')
        w('    }')
        for i in range(r):
            v = '_mm512_add_ps(c0_%d, c1_%d)' % (i, i) if sets == 2 else 'c0_%d' % i
            w('    _mm512_storeu_ps(t[%d], %s);' % (i, v))
    else:
        w('    for (int i = 0; i < %d; i++)' % r)
        w('        for (int j = 0; j < %d; j++) t[i][j] = %s;' % (
            GEMM_NR, 'c[0][i][j] + c[1][i][j]' if sets == 2 else 'c[0][i][j]'))
    w('    for (int i = 0; i < %d; i++)' % r)
    w('        for (int64_t j = 0; j < ncols; j++) y[i * %d + j] = bias ? t[i][j] + bias[j] : t[i][j];' % N)
    w('}')
    isa_end(w, isa)


# Two row tiles a call on AVX-512 (gemm_mk2_calls): with 32 vector
# registers two tiles of up to 6 rows fit over the two panels (24
# accumulators), so a panel block is read from L1 once for 10-12 rows
# instead of 5-6, and one call streams it. Only tiles of one accumulator
# set each (r > split): each output's sum keeps its k order, the same bits.
# Xeon (family 6 model 0xa7), the FFN-up instance alone, weights cycled
# through 24 copies, min of 2-3 alternated runs, us, 1 / 2 threads: 32 x
# 3072 x 768 (tiles 6, 6, 5, 5, 5, 5 -> three pairs) 1012-1078 / 526-549
# -> 896-977 / 442-472 (in L2: 195 -> 203 GFLOP/s); 16 x 3072 x 768 (6,
# 5, 5 -> a pair and one) 663-701 / 330-342 -> 634-694 / 291-316.
GEMM_PAIR_ROWS = 12


def gemm_mk2_calls(rows, split):
    """The AVX-512 two-panel calls of an instance's row tiles: consecutive
    tiles in pairs while both have one accumulator set and together at
    most GEMM_PAIR_ROWS rows, else one tile a call; a list of tuples of
    tile indices."""
    calls, t = [], 0
    while t < len(rows):
        if (t + 1 < len(rows) and rows[t][1] > split and rows[t + 1][1] > split
                and rows[t][1] + rows[t + 1][1] <= GEMM_PAIR_ROWS):
            calls.append((t, t + 1))
            t += 2
        else:
            calls.append((t,))
            t += 1
    return calls


def gemm_mk2_name(name, rs, kn, npf):
    """The AVX-512 two-tile micro-kernel's name: the rows of each tile it
    takes (rs), its K block's steps (kn) and its hint parts (npf)."""
    return '%s__mk%s_k%d_avx512x2%s' % (name, '_'.join('%d' % r for r in rs), kn, gemm_pf_sfx(npf))


def emit_gemm_mk2(w, name, N, K, rs, sets, U4, kn, reload, npf=1):
    """The AVX-512 micro-kernel of one or two row tiles (rs: their rows;
    the second tile's x at xb, its y rows after the first's) over two full
    panels side by side (bp and bp + K 16 floats; one K block of kn
    steps): 2 r accumulator chains per set instead of r, and two weight
    streams, each output's sum in the k order of emit_gemm_mk (set u %
    sets at unrolled step u), so the same bits. Hints one line of each of
    npf parts of the next two panels' blocks (pf, pf + K 16) per unrolled
    step."""
    assert len(rs) == 1 or sets == 1
    r = sum(rs)
    xs = [('x', i, rs[0]) for i in range(rs[0])] + ([('xb', i, rs[1]) for i in range(rs[1])] if len(rs) > 1 else [])
    isa_begin(w, 'avx512')
    w('static void %s(const float *x,%s const float *bp, const float *bias, float *y,'
      % (gemm_mk2_name(name, rs, kn, npf), ' const float *xb,' if len(rs) > 1 else ''))
    w('                         int first, const float *pf) {')
    for s_ in range(sets):
        for i in range(r):
            w('    __m512 c%d_%d_0 = _mm512_setzero_ps(), c%d_%d_1 = _mm512_setzero_ps();' % (s_, i, s_, i))
    if not reload:
        w('    (void)first;')
    else:
        w('    if (!first) {')
        for i in range(r):
            w('        c0_%d_0 = _mm512_loadu_ps(y + %d);' % (i, i * N))
            w('        c0_%d_1 = _mm512_loadu_ps(y + %d);' % (i, i * N + GEMM_NR))
        w('    }')

    def kstep(kexpr, s_):
        L = ['{']
        L.append('    const __m512 b0 = _mm512_loadu_ps(bp + (%s) * %d), b1 = _mm512_loadu_ps(bp + %d + (%s) * %d);'
                 % (kexpr, GEMM_NR, K * GEMM_NR, kexpr, GEMM_NR))
        for g, (xv, i, rt) in enumerate(xs):
            L.append('    { const __m512 a = _mm512_set1_ps(%s[(%s) * %d + %d]); c%d_%d_0 = _mm512_fmadd_ps(a, b0, c%d_%d_0); c%d_%d_1 = _mm512_fmadd_ps(a, b1, c%d_%d_1); }'
                     % (xv, kexpr, rt, i, s_, g, s_, g, s_, g, s_, g))
        L.append('}')
        return L
    full = kn // U4
    if full:
        w('    for (int64_t k = 0; k < %d; k += %d) {' % (full * U4, U4))
        emit_gemm_pf(w, 'pf', npf, full * GEMM_NR, GEMM_NR // U4)
        emit_gemm_pf(w, 'pf + %d' % (K * GEMM_NR), npf, full * GEMM_NR, GEMM_NR // U4)
        for u in range(U4):
            for line in kstep('k + %d' % u, u % sets):
                w('        ' + line)
        w('    }')
    emit_gemm_pf_void(w, full, npf)
    for k in range(full * U4, kn):
        for line in kstep('%d' % k, k % sets):
            w('    ' + line)
    for i in range(r):
        for h in (0, 1):
            v = '_mm512_add_ps(c0_%d_%d, c1_%d_%d)' % (i, h, i, h) if sets == 2 else 'c0_%d_%d' % (i, h)
            w('    _mm512_storeu_ps(y + %d, bias ? _mm512_add_ps(%s, _mm512_loadu_ps(bias + %d)) : %s);'
              % (i * N + GEMM_NR * h, v, GEMM_NR * h, v))
    w('}')
    isa_end(w, 'avx512')


# Panels walked at once. An instance of one row tile of 1 or 2 rows (M = 1,
# 2: decode) with K in one block reads the weight at DRAM speed only with
# several streams in flight: one 16-column panel at a time is one stream
# (the prefetchers stop at every 4 KiB page). Its micro-kernel then walks
# P full panels side by side over the whole K, each output one k-ordered
# chain (2 P r accumulators: 8 at P = 4, r = 1 and P = 2, r = 2); the
# other panels (a task's last ones, the partial one) run the one-panel
# kernel with one accumulator set, so any split gives the same bits.
# Each unrolled step hints 2 lines of every panel 1 KiB ahead (the next
# step's lines come from the prefetchers). Zen 3 of docs/gen_models.md,
# N = K = 4096, one thread, weights cycled through two copies, ms: f32
# M = 1 one panel 2.33-2.39, 4 at once 1.95-2.06 (2 at once 2.36); bf16
# M = 1 1.33 -> 0.86-1.01 (1 line 512 bytes ahead: 1.49-1.65, no hints
# 0.99-1.05); M = 2 f32 3.3-3.5 -> 3.2-3.4, bf16 1.54-1.68 -> 1.17-1.31
# (4 at once: f32 2.9-3.2 with 16 accumulators, bf16 1.30-1.42).
GEMM_PWALK = {1: 4, 2: 2}


def emit_gemm_pwalk_pf(w, at):
    """A P-panel kernel's hints for one panel at one unrolled step."""
    for l in range(2):
        w('        _mm_prefetch((const char *)(%s) + %d, _MM_HINT_T0);' % (at, 1024 + 64 * l))


def emit_gemm_pwalk_body(w, K, r, P, U4, loads, isa='avx2'):
    """The x86 body of a P-panel kernel: K unrolled U4 times, the hints,
    and per k the r broadcasts of x and for each panel the lines loads(q,
    k expression) (opening a block that sets the panel's k-row: AVX2 b0,
    b1, columns 0-7 and 8-15; AVX-512 b) and its FMAs into the
    accumulators c{i}_{q}_{0,1} (AVX2) or c{i}_{q} (AVX-512) of row i,
    panel q."""
    PS = K * GEMM_NR
    vt, vp = ('__m256', '_mm256') if isa == 'avx2' else ('__m512', '_mm512')
    parts = (('_0', 'b0'), ('_1', 'b1')) if isa == 'avx2' else (('', 'b'),)
    for i in range(r):
        for q in range(P):
            w('    %s %s;' % (vt, ', '.join('c%d_%d%s = %s_setzero_ps()' % (i, q, sf, vp) for sf, _ in parts)))

    def kstep(kx):
        L = ['{']
        for i in range(r):
            L.append('    const %s a%d = %s_set1_ps(x[(%s) * %d + %d]);' % (vt, i, vp, kx, r, i))
        for q in range(P):
            L += ['    ' + x for x in loads(q, kx)]
            for i in range(r):
                L.append('      ' + ' '.join('c%d_%d%s = %s_fmadd_ps(a%d, %s, c%d_%d%s);' % (i, q, sf, vp, i, bv, i, q, sf)
                                             for sf, bv in parts))
            L.append('    }')
        L.append('}')
        return L
    emit_kloop(w, K, U4, kstep, lambda: [emit_gemm_pwalk_pf(w, 'bp + %d + k * %d' % (q * PS, GEMM_NR))
                                         for q in range(P)])


def emit_kloop(w, n, U, kstep, head=lambda: None):
    """k over [0, n) unrolled U times (head() opens each unrolled step),
    then the tail steps; kstep(k expression) gives one step's lines."""
    full = n // U
    if full:
        w('    for (int64_t k = 0; k < %d; k += %d) {' % (full * U, U))
        head()
        for u in range(U):
            for line in kstep('k + %d' % u):
                w('        ' + line)
        w('    }')
    for k in range(full * U, n):
        for line in kstep('%d' % k):
            w('    ' + line)


def gemm_pwalk(M, K, rows):
    """Panels the micro-kernel walks at once (1: one at a time)."""
    if len(rows) != 1 or gemm_kblock(M, K, len(rows)) < K:
        return 1
    return GEMM_PWALK.get(rows[0][1], 1)


def emit_gemm_mkp(w, name, N, K, r, P, isa, U4):
    """The P-panel micro-kernel of gemm_pwalk: r rows of x (tiles' layout)
    against P full panels from bp on, the whole K, y = acc (+ bias)."""
    isa_begin(w, isa)
    w('static void %s__mkp_%s(const float *x, const float *bp, const float *bias, float *y) {' % (name, isa))
    PS = K * GEMM_NR
    if isa == 'avx2':
        emit_gemm_pwalk_body(w, K, r, P, U4, lambda q, kx: [
            '{ const __m256 b0 = _mm256_loadu_ps(bp + %d + (%s) * %d), b1 = _mm256_loadu_ps(bp + %d + (%s) * %d + 8);'
            % (q * PS, kx, GEMM_NR, q * PS, kx, GEMM_NR)])
        for i in range(r):
            for q in range(P):
                for h in (0, 1):
                    v = 'c%d_%d_%d' % (i, q, h)
                    o = q * GEMM_NR + 8 * h
                    w('    _mm256_storeu_ps(y + %d, bias ? _mm256_add_ps(%s, _mm256_loadu_ps(bias + %d)) : %s);'
                      % (i * N + o, v, o, v))
    elif isa == 'avx512':
        emit_gemm_pwalk_body(w, K, r, P, U4, lambda q, kx: [
            '{ const __m512 b = _mm512_loadu_ps(bp + %d + (%s) * %d);' % (q * PS, kx, GEMM_NR)], isa)
        for i in range(r):
            for q in range(P):
                v = 'c%d_%d' % (i, q)
                o = q * GEMM_NR
                w('    _mm512_storeu_ps(y + %d, bias ? _mm512_add_ps(%s, _mm512_loadu_ps(bias + %d)) : %s);'
                  % (i * N + o, v, o, v))
    else:
        w('    float c[%d][%d];' % (r, P * GEMM_NR))
        w('    memset(c, 0, sizeof c);')
        w('    for (int64_t k = 0; k < %d; k++)' % K)
        w('        for (int i = 0; i < %d; i++)' % r)
        w('            for (int q = 0; q < %d; q++)' % P)
        w('                for (int j = 0; j < %d; j++)' % GEMM_NR)
        w('                    c[i][q * %d + j] = fmaf(x[k * %d + i], bp[q * %d + k * %d + j], c[i][q * %d + j]);'
          % (GEMM_NR, r, PS, GEMM_NR, GEMM_NR))
        w('    for (int i = 0; i < %d; i++)' % r)
        w('        for (int j = 0; j < %d; j++) y[i * %d + j] = bias ? c[i][j] + bias[j] : c[i][j];' % (P * GEMM_NR, N))
    w('}')
    isa_end(w, isa)


def bf16_hi(isa):
    """The mask constant bf16_row needs."""
    if isa == 'avx512':
        return 'const __m512i hi = _mm512_set1_epi32(-65536);'
    return 'const __m256i hi = _mm256_set1_epi32(-65536);'


def bf16_row(isa, addr):
    """A bf16 panel's k-row at addr widened to f32 (eight words, column j in
    the low half of word j, 8 + j in the high half): AVX2 as b0 (columns
    0-7: one shift) and b1 (8-15: one mask), AVX-512 as b (the row in both
    halves of a zmm, then one AND and one masked shift)."""
    if isa == 'avx512':
        return ['const __m512i wv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)(%s)));' % addr,
                'const __m512 b = _mm512_castsi512_ps(_mm512_mask_slli_epi32(_mm512_and_si512(wv, hi), 0x00ff, wv, 16));']
    return ['const __m256i wv = _mm256_loadu_si256((const __m256i *)(const void *)(%s));' % addr,
            'const __m256 b0 = _mm256_castsi256_ps(_mm256_slli_epi32(wv, 16)), b1 = _mm256_castsi256_ps(_mm256_and_si256(wv, hi));']


def emit_gemm_mkp_bf16(w, name, K, r, P, isa, U4):
    """The bf16 instance's P-panel micro-kernel (gemm_pwalk): r rows of x
    (f32, tiles' layout) against P full bf16 panels from bp on, the whole
    K; panel q's r x 16 sums to t + q r 16 (row stride 16)."""
    isa_begin(w, isa)
    w('static void %s__mkp_%s(const float *x, const uint16_t *bp, float *t) {' % (name, isa))
    PS = K * GEMM_NR
    if isa != 'scalar':
        z = isa == 'avx512'
        w('    ' + bf16_hi(isa))
        emit_gemm_pwalk_body(w, K, r, P, U4, lambda q, kx: [
            ('{ ' if n == 0 else '  ') + l
            for n, l in enumerate(bf16_row(isa, 'bp + %d + (%s) * %d' % (q * PS, kx, GEMM_NR)))], isa)
        for q in range(P):
            for i in range(r):
                for h in ((0,) if z else (0, 1)):
                    w('    %s(t + %d, c%d_%d%s);' % ('_mm512_storeu_ps' if z else '_mm256_storeu_ps',
                                                 (q * r + i) * GEMM_NR + 8 * h, i, q, '' if z else '_%d' % h))
    else:
        w('    float c[%d][%d][%d], b[%d];' % (P, r, GEMM_NR, GEMM_NR))
        w('    memset(c, 0, sizeof c);')
        w('    for (int64_t k = 0; k < %d; k++)' % K)
        w('        for (int q = 0; q < %d; q++) {' % P)
        w('            const uint16_t *w = bp + q * %d + k * %d;' % (PS, GEMM_NR))
        w('            for (int j = 0; j < 8; j++) { b[j] = %s__bf(w[2 * j]); b[j + 8] = %s__bf(w[2 * j + 1]); }' % (name, name))
        w('            for (int i = 0; i < %d; i++)' % r)
        w('                for (int j = 0; j < %d; j++) c[q][i][j] = fmaf(x[k * %d + i], b[j], c[q][i][j]);' % (GEMM_NR, r))
        w('        }')
        w('    memcpy(t, c, sizeof c);')
    w('}')
    isa_end(w, isa)


def emit_gemm_kloops(w, K, KC, rows, U4, mk_call, pre=()):
    """The K-block loops of an instance's panels [p0, p1): block kb
    of every panel (each row tile's micro-kernel, prefetching its share of
    the next block, bn: the next panel's, after the last panel the first
    panel's next full block), then block kb + 1. mk_call(m0, r, kn, xo,
    last, pfo, npf) gives one micro-kernel call (its hints from bn + pfo,
    npf parts: gemm_pf_parts); the lines pre open each panel's
    turn (the multi-panel walk of gemm_pwalk)."""
    nfull, ktail = K // KC, K % KC
    for kn, kb0, kb1 in [(KC, 0, nfull)] + ([(ktail, nfull, nfull + 1)] if ktail else []):
        last = nfull if ktail else nfull - 1
        w('    for (int64_t kb = %d; kb < %d; kb++)' % (kb0, kb1))
        w('        for (int64_t p = p0; p < p1; p++) {')
        for line in (pre(kn, last) if callable(pre) else pre):
            w('            ' + line)
        for line in mk_call(None, None, kn, None, last, None, None):
            w('            ' + line)
        nit = kn // U4
        for (m0, r), (q0, nq) in zip(rows, gemm_pf_parts(len(rows), U4)):
            for line in mk_call(m0, r, kn, 'kb * %d' % (KC * r), last, q0 * nit * GEMM_NR, nq):
                w('            ' + line)
        w('        }')


def emit_gemm_impl(w, name, U, M, N, K, NP, rows, sto, cfg):
    w('')
    w('%svoid %s_pack(const float *w, float *packed) {' % (sto, name))
    w('    for (int64_t p = 0; p < %d; p++)' % NP)
    w('        for (int64_t k = 0; k < %d; k++)' % K)
    w('            for (int64_t j = 0; j < %d; j++) {' % GEMM_NR)
    w('                int64_t n = p * %d + j;' % GEMM_NR)
    w('                packed[(p * %d + k) * %d + j] = n < %d ? w[n * %d + k] : 0.0f;' % (K, GEMM_NR, N, K))
    w('            }')
    w('}')
    KC = gemm_kblock(M, K, len(rows))
    lens = [KC] + ([K % KC] if K % KC else [])
    PW = gemm_pwalk(M, K, rows)
    pfp = gemm_pf_parts(len(rows), cfg['unroll'])
    mk2 = PW == 1 and N >= 2 * GEMM_NR
    calls2 = gemm_mk2_calls(rows, cfg['split'] if K >= 2 else -1) if mk2 else []
    pfp2 = gemm_pf_parts(len(calls2), cfg['unroll'])
    for r in sorted(set(r for _, r in rows)):
        split = r <= cfg['split'] and K >= 2 and PW == 1
        sets = 2 if split else 1
        npfs = sorted(set(nq for (_, rr), (_, nq) in zip(rows, pfp) if rr == r))
        for kn in lens:
            for isa in GEMM_ISAS:
                for npf in (npfs if isa != 'scalar' else [1]):
                    emit_gemm_mk(w, name, N, r, sets, isa, cfg['unroll'], kn, KC < K, npf)
    for rs, npf in sorted(set((tuple(rows[t][1] for t in c), nq) for c, (_, nq) in zip(calls2, pfp2))):
        sets = 2 if len(rs) == 1 and rs[0] <= cfg['split'] and K >= 2 else 1
        for kn in lens:
            emit_gemm_mk2(w, name, N, K, rs, sets, cfg['unroll'], kn, KC < K, npf)
    if PW > 1:
        for isa in GEMM_ISAS:
            emit_gemm_mkp(w, name, N, K, rows[0][1], PW, isa, cfg['unroll'])
    for isa in GEMM_ISAS:
        isa_begin(w, isa, target=False)
        w('static void %s__panels_%s(const float *x, const float *packed, const float *bias, float *y,' % (name, isa))
        w('                         int64_t p0, int64_t p1) {')

        def mk_call(m0, r, kn, xo, last, pfo, npf, isa=isa):
            if m0 is None:
                return ['const float *bp = packed + p * %d + kb * %d;' % (K * GEMM_NR, KC * GEMM_NR),
                        'const float *bn = p + 1 < p1 ? bp + %d : kb + 1 < %d ? packed + p0 * %d + (kb + 1) * %d : bp;'
                        % (K * GEMM_NR, K // KC, K * GEMM_NR, KC * GEMM_NR),
                        'const float *bi = bias && kb == %d ? bias + p * %d : NULL;' % (last, GEMM_NR),
                        'int64_t nc = %d - p * %d < %d ? %d - p * %d : %d;' % (
                            N, GEMM_NR, GEMM_NR, N, GEMM_NR, GEMM_NR)]
            return ['%s__mk%d_k%d_%s%s(x + %s, bp, bi, y + %d + p * %d, nc, kb == 0, bn + %d);'
                    % (name, r, kn, isa, gemm_pf_sfx(npf, isa), '%d + %s' % (m0 * K, xo) if m0 else xo,
                       m0 * N, GEMM_NR, pfo)]
        pre = ()
        if PW > 1:
            pre = ['if (p + %d <= p1 && p + %d <= %d) { /* %d full panels at once */' % (PW, PW, N // GEMM_NR, PW),
                   '    %s__mkp_%s(x, packed + p * %d, bias ? bias + p * %d : NULL, y + p * %d);'
                   % (name, isa, K * GEMM_NR, GEMM_NR, GEMM_NR),
                   '    p += %d;' % (PW - 1),
                   '    continue;',
                   '}']
        elif isa == 'avx512' and N >= 2 * GEMM_NR:
            def pre(kn, last, isa=isa):
                # two full panels at once (emit_gemm_mk2)
                L = ['if (p + 1 < p1 && p + 1 < %d) {' % (N // GEMM_NR),
                     '    const float *bp = packed + p * %d + kb * %d;' % (K * GEMM_NR, KC * GEMM_NR),
                     '    const float *bn = p + 2 < p1 ? bp + %d : kb + 1 < %d ? packed + p0 * %d + (kb + 1) * %d : bp;'
                     % (2 * K * GEMM_NR, K // KC, K * GEMM_NR, KC * GEMM_NR),
                     '    const float *bi = bias && kb == %d ? bias + p * %d : NULL;' % (last, GEMM_NR)]
                nit = kn // cfg['unroll']

                def xo(t):
                    m0, r = rows[t]
                    return 'x + %s' % ('%d + kb * %d' % (m0 * K, KC * r) if m0 else 'kb * %d' % (KC * r))
                for c, (q0, nq) in zip(calls2, pfp2):
                    L.append('    %s(%s, bp, bi, y + %d + p * %d, kb == 0, bn + %d);'
                             % (gemm_mk2_name(name, [rows[t][1] for t in c], kn, nq), ', '.join(xo(t) for t in c),
                                rows[c[0]][0] * N, GEMM_NR, q0 * nit * GEMM_NR))
                L += ['    p++;', '    continue;', '}']
                return L
        emit_gemm_kloops(w, K, KC, rows, cfg['unroll'], mk_call, pre)
        w('}')
        isa_end(w, isa)
    w('')
    w('/* x [%d,%d] to the tiles\' layout (tile (m0, r) from m0 K on, k-major) */' % (M, K))
    w('static void %s__xpack(const float *x, float *xp) {' % name)
    emit_gemm_xpack(w, M, K, rows, 'x', '%s', 'xp')
    w('}')
    w('')
    w('typedef struct %s__args {' % name)
    w('    kern_ctx *ctx;')
    w('    const float *x, *packed, *bias;')
    w('    float *y;')
    w('    const kern_epilogue *epi;')
    w('    float alpha;')
    w('    int64_t per;')
    w('} %s__args;' % name)
    w('')
    w('/* panels [t per, (t + 1) per) and their epilogue */')
    w('static void %s__task(void *arg, int64_t t, int thread) {' % name)
    w('    const %s__args *a = (const %s__args *)arg;' % (name, name))
    w('    int64_t p0 = t * a->per, p1 = p0 + a->per < %d ? p0 + a->per : %d;' % (NP, NP))
    w('    (void)thread;')
    emit_isa_dispatch(w, lambda isa: '%s__panels_%s(a->x, a->packed, a->bias, a->y, p0, p1)' % (name, isa))
    emit_task_epilogue(w, M, N, GEMM_NR, 'a->alpha')
    w('}')
    w('')
    w('/* the column panels of y = epilogue(alpha x.W^T), x already in the')
    w(' * tiles\' layout, over the context\'s threads (below) */')
    w('static kern_status %s__run_xp(kern_ctx *ctx, const float *x, const float *packed,' % name)
    w('                               const float *bias, float *y, const kern_epilogue *epi,')
    w('                               float alpha) {')
    w('    %s__args a;' % name)
    w('    kern_status st = KERN_OK;')
    w('    a.ctx = ctx;')
    w('    a.x = x;')
    w('    a.packed = packed;')
    w('    a.bias = bias;')
    w('    a.y = y;')
    w('    a.epi = epi;')
    w('    a.alpha = alpha;')
    emit_panel_split(w, name, NP, tpt_expr(cfg))
    w('    return st;')
    w('}')
    w('')
    w('/* y = epilogue(alpha x.W^T) with kern_gemm\'s epilogue (bias applied by')
    w(' * the micro-kernels when epi is NULL): x copied into the tiles\' layout')
    w(' * in xbuf (a generated model\'s arena) or the context\'s workspace, then')
    w(' * the column panels split over the context\'s threads (the same bits on')
    w(' * any thread count). */')
    w('static kern_status %s__run_epi(kern_ctx *ctx, const float *x, const float *packed,' % name)
    w('                               const float *bias, float *y, const kern_epilogue *epi,')
    w('                               float alpha, float *xbuf) {')
    w('    kern_status st = kern__op_begin(&ctx, "%s_run");' % name)
    w('    if (st) return st;')
    w('    if (!xbuf) xbuf = (float *)kern__workspace(ctx, (size_t)%d * sizeof(float));' % (M * K))
    w('    if (!xbuf) {')
    w('        kern__op_end(ctx);')
    w('        return kern__err(KERN_ERR_NOMEM, "%s_run: no memory for x in the tiles\' layout");' % name)
    w('    }')
    w('    %s__xpack(x, xbuf);' % name)
    w('    st = %s__run_xp(ctx, xbuf, packed, bias, y, epi, alpha);' % name)
    w('    kern__op_end(ctx);')
    w('    return st;')
    w('}')
    if sto:
        return  # inside a model: it calls NAME__run_epi
    w('')
    w('kern_status %s_run(kern_ctx *ctx, const float *x, const float *packed, const float *bias,' % name)
    w('                   float *y) {')
    w('    if (!x || !packed || !y) return kern__err(KERN_ERR_ARG, "%s_run: x, packed or y is NULL");' % name)
    w('    return %s__run_epi(ctx, x, packed, bias, y, NULL, 1.0f, NULL);' % name)
    w('}')


# bf16 instances: x, W, bias and y bf16, products summed in f32. W stays
# bf16 in the packed panels (half the bytes the f32 panels stream: what a
# small-M GEMM waits on), 16 columns a k-row as eight 32-bit words, word j
# holding column j in its low half and column 8 + j in its high half, so
# AVX2 widens a k-row with one shift (columns 0-7) and one mask (8-15). x
# is widened to f32 once per call into the context's workspace, in the row
# tiles' layout of the f32 instance (the comment above GEMM_X_L2): the
# micro-kernel then broadcasts f32 as the f32 instance does (x widened per
# use was 1.6x slower at M=16, a 16-bit broadcast plus mask 1.2x at M=64,
# on the Zen 3 of docs/gen_models.md), and prefetches the next panel as
# the f32 one does. K stays whole: the f32 instance measured no gain from
# the K blocks themselves, and bf16 partial sums would need an f32 copy of
# y. y = bf16(acc + bias) rounded to nearest even once, kern_f32_to_bf16's
# rule.
def emit_gemm_bf16(w, name, U, M, N, K, NP, rows, sto, cfg, head, banner):
    MRX = max(r for _, r in rows)
    if head:
        emit_banner(w, name, banner)
        w(' * y[%d,%d] = x[%d,%d] . W^T (+ bias), bf16 x, W, bias and y: products' % (M, N, M, K))
        w(' * summed in f32, y rounded to nearest even once. W [%d,%d] row-major (a' % (N, K))
        w(' * torch Linear weight) is packed once by %s_pack into %s_PACKED_ELEMS' % (name, U))
        w(' * bf16 (%s_PACKED_BYTES bytes). x is widened to f32 in the context\'s' % U)
        w(' * workspace, into the row tiles\' layout; the column panels split over')
        w(' * its threads (the same bits on any thread count); the ISA is the')
        w(' * context\'s (AVX-512, AVX2+FMA or the scalar twin, which give the same')
        w(' * bits). */')
        w('#ifndef %s_H' % U)
        w('#define %s_H' % U)
        w('#include "kern.h"')
        w('#define %s_M %d' % (U, M))
        w('#define %s_N %d' % (U, N))
        w('#define %s_K %d' % (U, K))
        w('#define %s_PACKED_ELEMS ((size_t)%d)' % (U, NP * K * GEMM_NR))
        w('#define %s_PACKED_BYTES ((size_t)%d)' % (U, NP * K * GEMM_NR * 2))
        w('void %s_pack(const uint16_t *w, uint16_t *packed);' % name)
        w('kern_status %s_run(kern_ctx *ctx, const uint16_t *x, const uint16_t *packed,' % name)
        w('                   const uint16_t *bias, uint16_t *y);')
        emit_impl_open(w, U)
    w('')
    w('/* bf16 bits as f32, exactly (a signalling NaN stays one: the FMAs quiet it) */')
    w('static float %s__bf(uint16_t h) {' % name)
    w('    uint32_t u = (uint32_t)h << 16;')
    w('    float f;')
    w('    memcpy(&f, &u, 4);')
    w('    return f;')
    w('}')
    w('')
    w('/* panel p, k-row k: 16 bf16, column j at 2j, column 8 + j at 2j + 1 */')
    w('%svoid %s_pack(const uint16_t *w, uint16_t *packed) {' % (sto, name))
    w('    for (int64_t p = 0; p < %d; p++)' % NP)
    w('        for (int64_t k = 0; k < %d; k++)' % K)
    w('            for (int64_t j = 0; j < %d; j++) {' % GEMM_NR)
    w('                int64_t n = p * %d + (j >> 1) + (j & 1) * 8;' % GEMM_NR)
    w('                packed[(p * %d + k) * %d + j] = n < %d ? w[n * %d + k] : (uint16_t)0;' % (K, GEMM_NR, N, K))
    w('            }')
    w('}')
    PW = gemm_pwalk(M, K, rows)
    pfp = gemm_pf_parts(len(rows), max(1, cfg['unroll'] // 2))
    for r in sorted(set(r for _, r in rows)):
        split = r <= cfg['split'] and K >= 2 and PW == 1
        sets = 2 if split else 1
        npfs = sorted(set(nq for (_, rr), (_, nq) in zip(rows, pfp) if rr == r))
        for isa, npf in [(isa, npf) for isa in GEMM_ISAS for npf in (npfs if isa != 'scalar' else [1])]:
            isa_begin(w, isa)
            w('static void %s__mk%d_%s%s(const float *x, const uint16_t *bp, float *t, const uint16_t *pf) {' % (
                name, r, isa, gemm_pf_sfx(npf, isa)))
            if isa == 'scalar':
                w('    (void)pf;')
            if isa == 'avx2':
                w('    ' + bf16_hi(isa))
                for s_ in range(sets):
                    for i in range(r):
                        w('    __m256 c%d_%d_0 = _mm256_setzero_ps(), c%d_%d_1 = _mm256_setzero_ps();' % (s_, i, s_, i))
            elif isa == 'avx512':
                w('    ' + bf16_hi(isa))
                for s_ in range(sets):
                    for i in range(r):
                        w('    __m512 c%d_%d = _mm512_setzero_ps();' % (s_, i))
            else:
                w('    float c[%d][%d][%d], b[%d];' % (sets, r, GEMM_NR, GEMM_NR))
                w('    memset(c, 0, sizeof c);')

            def xat(i, kexpr, r=r):
                return '(%s) * %d + %d' % (kexpr, r, i)

            def kstep(kexpr, s_):
                L = ['{']
                if isa == 'avx2':
                    L += ['    ' + l for l in bf16_row(isa, 'bp + (%s) * %d' % (kexpr, GEMM_NR))]
                    for i in range(r):
                        L.append('    { const __m256 a = _mm256_broadcast_ss(x + %s); c%d_%d_0 = _mm256_fmadd_ps(a, b0, c%d_%d_0); c%d_%d_1 = _mm256_fmadd_ps(a, b1, c%d_%d_1); }' % (xat(i, kexpr), s_, i, s_, i, s_, i, s_, i))
                elif isa == 'avx512':
                    L += ['    ' + l for l in bf16_row(isa, 'bp + (%s) * %d' % (kexpr, GEMM_NR))]
                    for i in range(r):
                        L.append('    c%d_%d = _mm512_fmadd_ps(_mm512_set1_ps(x[%s]), b, c%d_%d);' % (s_, i, xat(i, kexpr), s_, i))
                else:
                    L.append('    const uint16_t *w = bp + (%s) * %d;' % (kexpr, GEMM_NR))
                    L.append('    for (int j = 0; j < 8; j++) { b[j] = %s__bf(w[2 * j]); b[j + 8] = %s__bf(w[2 * j + 1]); }' % (name, name))
                    for i in range(r):
                        L.append('    { const float a = x[%s]; for (int j = 0; j < %d; j++) c[%d][%d][j] = fmaf(a, b[j], c[%d][%d][j]); }' % (xat(i, kexpr), GEMM_NR, s_, i, s_, i))
                L.append('}')
                return L
            U4 = cfg['unroll']
            full = K // U4
            if full:
                w('    for (int64_t k = 0; k < %d; k += %d) {' % (full * U4, U4))
                if isa != 'scalar':  # a 64-byte line is two k-rows of a bf16 panel
                    emit_gemm_pf(w, 'pf', npf, full * 2 * GEMM_NR, 2 * GEMM_NR // U4)
                for u in range(U4):
                    for line in kstep('k + %d' % u, u % sets):
                        w('        ' + line)
                w('    }')
            if isa != 'scalar':
                emit_gemm_pf_void(w, full, npf)
            for k in range(full * U4, K):
                for line in kstep('%d' % k, k % sets):
                    w('    ' + line)
            if isa == 'avx2':
                for i in range(r):
                    if sets == 2:
                        w('    _mm256_storeu_ps(t + %d, _mm256_add_ps(c0_%d_0, c1_%d_0));' % (i * GEMM_NR, i, i))
                        w('    _mm256_storeu_ps(t + %d, _mm256_add_ps(c0_%d_1, c1_%d_1));' % (i * GEMM_NR + 8, i, i))
                    else:
                        w('    _mm256_storeu_ps(t + %d, c0_%d_0);' % (i * GEMM_NR, i))
                        w('    _mm256_storeu_ps(t + %d, c0_%d_1);' % (i * GEMM_NR + 8, i))
            elif isa == 'avx512':
                for i in range(r):
                    v = '_mm512_add_ps(c0_%d, c1_%d)' % (i, i) if sets == 2 else 'c0_%d' % i
                    w('    _mm512_storeu_ps(t + %d, %s);' % (i * GEMM_NR, v))
            else:
                w('    for (int i = 0; i < %d; i++)' % r)
                w('        for (int j = 0; j < %d; j++) t[i * %d + j] = %s;' % (
                    GEMM_NR, GEMM_NR, 'c[0][i][j] + c[1][i][j]' if sets == 2 else 'c[0][i][j]'))
            w('}')
            isa_end(w, isa)
    # the stores: y = bf16(t + bias), kern_f32_to_bf16's rounding
    w('')
    w('/* rows [0, r) of the tile t (+ bias) to y as bf16, nearest even */')
    w('static void %s__st_scalar(const float *t, int r, const uint16_t *bias, uint16_t *y, int64_t ncols) {' % name)
    w('    for (int i = 0; i < r; i++)')
    w('        for (int64_t j = 0; j < ncols; j++)')
    w('            y[i * %d + j] = kern_f32_to_bf16(bias ? t[i * %d + j] + %s__bf(bias[j]) : t[i * %d + j]);' % (N, GEMM_NR, name, GEMM_NR))
    w('}')
    w('')
    w('#ifdef KERN_X86')
    w('/* kern_f32_to_bf16 on 8 lanes (NaN kept and made quiet, else nearest even) */')
    w('KERN_TARGET_AVX2')
    w('static __m128i %s__rne8(__m256 v) {' % name)
    w('    const __m256i u = _mm256_castps_si256(v);')
    w('    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),')
    w('                                           _mm256_set1_epi32(0x7f800000));')
    w('    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff),')
    w('                                                     _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1))));')
    w('    r = _mm256_blendv_epi8(r, _mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), nan);')
    w('    r = _mm256_srli_epi32(r, 16);')
    w('    r = _mm256_packus_epi32(r, r);')
    w('    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(r, 0x08));')
    w('}')
    w('')
    w('KERN_TARGET_AVX2')
    w('static void %s__st_avx2(const float *t, int r, const uint16_t *bias, uint16_t *y, int64_t ncols) {' % name)
    w('    if (ncols < %d) {' % GEMM_NR)
    w('        %s__st_scalar(t, r, bias, y, ncols);' % name)
    w('        return;')
    w('    }')
    w('    for (int i = 0; i < r; i++)')
    w('        for (int h = 0; h < %d; h += 8) {' % GEMM_NR)
    w('            __m256 v = _mm256_loadu_ps(t + i * %d + h);' % GEMM_NR)
    w('            if (bias)')
    w('                v = _mm256_add_ps(v, _mm256_castsi256_ps(_mm256_slli_epi32(')
    w('                                         _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(bias + h))), 16)));')
    w('            _mm_storeu_si128((__m128i *)(void *)(y + i * %d + h), %s__rne8(v));' % (N, name))
    w('        }')
    w('}')
    w('#endif')
    w('')
    if PW > 1:
        for isa in GEMM_ISAS:
            emit_gemm_mkp_bf16(w, name, K, rows[0][1], PW, isa, cfg['unroll'])
    w('')
    w('typedef struct %s__args {' % name)
    w('    kern_ctx *ctx;')
    w('    const float *x; /* x widened to f32 */')
    w('    const uint16_t *packed, *bias;')
    w('    uint16_t *y;')
    w('    const kern_epilogue *epi;')
    w('    float alpha;')
    w('    int64_t per;')
    w('} %s__args;' % name)
    for isa in GEMM_ISAS:
        isa_begin(w, isa)
        st = 'avx2' if isa == 'avx512' else isa  # the AVX2 store serves both
        w('static void %s__panels_%s(const %s__args *a, int64_t p0, int64_t p1) {' % (name, isa, name))
        w('    float t[%d];' % (max(MRX, rows[0][1] * PW) * GEMM_NR))
        w('    for (int64_t p = p0; p < p1; p++) {')
        if PW > 1:
            r0 = rows[0][1]
            w('        if (p + %d <= p1 && p + %d <= %d) { /* %d full panels at once */' % (PW, PW, N // GEMM_NR, PW))
            w('            %s__mkp_%s(a->x, a->packed + p * %d, t);' % (name, isa, K * GEMM_NR))
            w('            for (int64_t q = 0; q < %d; q++) {' % PW)
            w('                if (a->epi)')
            w('                    kern__epilogue_apply_tile(a->ctx, t + q * %d, %d, a->y, KERN_BF16, %d, 0, %d, (p + q) * %d, %d, a->alpha, a->epi);'
              % (r0 * GEMM_NR, GEMM_NR, N, r0, GEMM_NR, GEMM_NR))
            w('                else')
            w('                    %s__st_%s(t + q * %d, %d, a->bias ? a->bias + (p + q) * %d : NULL, a->y + (p + q) * %d, %d);'
              % (name, st, r0 * GEMM_NR, r0, GEMM_NR, GEMM_NR, GEMM_NR))
            w('            }')
            w('            p += %d;' % (PW - 1))
            w('            continue;')
            w('        }')
        w('        const uint16_t *bp = a->packed + p * %d;' % (K * GEMM_NR))
        w('        const uint16_t *bi = a->bias ? a->bias + p * %d : NULL;' % GEMM_NR)
        w('        int64_t nc = %d - p * %d < %d ? %d - p * %d : %d;' % (N, GEMM_NR, GEMM_NR, N, GEMM_NR, GEMM_NR))
        w('        const uint16_t *bn = p + 1 < p1 ? bp + %d : bp;' % (K * GEMM_NR))
        nit = K // cfg['unroll']
        for (m0, r), (q0, nq) in zip(rows, pfp):
            w('        %s__mk%d_%s%s(a->x + %d, bp, t, bn + %d);' % (name, r, isa, gemm_pf_sfx(nq, isa), m0 * K,
                                                                 q0 * nit * 2 * GEMM_NR))
            w('        if (a->epi)')
            w('            kern__epilogue_apply_tile(a->ctx, t, %d, a->y, KERN_BF16, %d, %d, %d, p * %d, nc, a->alpha, a->epi);'
              % (GEMM_NR, N, m0, r, GEMM_NR))
            w('        else')
            w('            %s__st_%s(t, %d, bi, a->y + %d + p * %d, nc);' % (name, st, r, m0 * N, GEMM_NR))
        w('    }')
        w('}')
        isa_end(w, isa)
    w('')
    w('/* panels [t per, (t + 1) per), their epilogue tile by tile */')
    w('static void %s__task(void *arg, int64_t t, int thread) {' % name)
    w('    const %s__args *a = (const %s__args *)arg;' % (name, name))
    w('    int64_t p0 = t * a->per, p1 = p0 + a->per < %d ? p0 + a->per : %d;' % (NP, NP))
    w('    (void)thread;')
    emit_isa_dispatch(w, lambda isa: '%s__panels_%s(a, p0, p1)' % (name, isa), ret=True)
    w('}')
    w('')
    w('/* y = epilogue(alpha x.W^T) with kern_gemm\'s epilogue and bf16 store (bias')
    w(' * added by the stores when epi is NULL); x widened once, then the column')
    w(' * panels split over the context\'s threads (the same bits on any thread')
    w(' * count). */')
    w('static kern_status %s__run_epi(kern_ctx *ctx, const uint16_t *x, const uint16_t *packed,' % name)
    w('                               const uint16_t *bias, uint16_t *y, const kern_epilogue *epi,')
    w('                               float alpha, float *xbuf) {')
    w('    %s__args a;' % name)
    w('    float *xf;')
    w('    kern_status st = kern__op_begin(&ctx, "%s_run");' % name)
    w('    if (st) return st;')
    w('    /* x in f32: the caller\'s buffer (a generated model\'s arena) or the')
    w('     * context\'s scratch */')
    w('    xf = xbuf ? xbuf : (float *)kern__workspace(ctx, (size_t)%d * sizeof(float));' % (M * K))
    w('    if (!xf) {')
    w('        kern__op_end(ctx);')
    w('        return kern__err(KERN_ERR_NOMEM, "%s_run: no memory for x in f32");' % name)
    w('    }')
    emit_gemm_xpack(w, M, K, rows, 'x', name + '__bf(%s)', 'xf')
    w('    a.ctx = ctx;')
    w('    a.x = xf;')
    w('    a.packed = packed;')
    w('    a.bias = bias;')
    w('    a.y = y;')
    w('    a.epi = epi;')
    w('    a.alpha = alpha;')
    emit_panel_split(w, name, NP, tpt_expr(cfg))
    w('    kern__op_end(ctx);')
    w('    return st;')
    w('}')
    if sto:
        return
    w('')
    w('kern_status %s_run(kern_ctx *ctx, const uint16_t *x, const uint16_t *packed,' % name)
    w('                   const uint16_t *bias, uint16_t *y) {')
    w('    if (!x || !packed || !y) return kern__err(KERN_ERR_ARG, "%s_run: x, packed or y is NULL");' % name)
    w('    return %s__run_epi(ctx, x, packed, bias, y, NULL, 1.0f, NULL);' % name)
    w('}')


def cmd_gemm(args, argv):
    if args.dtype not in ('f32', 'bf16'):
        raise GenError("gemm: --dtype must be 'f32' or 'bf16', not %r" % args.dtype)
    for k in ('m', 'n', 'k'):
        v = getattr(args, k)
        if v < 1 or v > 1 << 20:
            raise GenError('gemm: --%s %d is outside [1, 1048576]' % (k, v))
    if args.m * args.k > 1 << 26 or args.n * args.k > 1 << 28:
        raise GenError('gemm: %dx%dx%d is too large for one instance' % (args.m, args.n, args.k))
    name = args.name or c_ident(os.path.splitext(os.path.basename(args.out))[0])
    if not re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', name):
        raise GenError('--name %r is not a C identifier' % name)
    log, cfg = [], None
    if args.blocking:
        try:
            vals = [int(v) for v in args.blocking.split(',')]
            mr, split, unroll = vals[:3]
            tpt = vals[3] if len(vals) == 4 else 0
            if len(vals) not in (3, 4):
                raise ValueError
        except ValueError:
            raise GenError('--blocking: expected MR,SPLIT,UNROLL[,TPT], got %r' % args.blocking)
        if not (1 <= mr <= 6 and 0 <= split <= 6 and unroll in (2, 4, 8)) or (
                tpt and tpt not in TPT_CANDIDATES):
            raise GenError('--blocking: MR in 1..6, SPLIT in 0..6, UNROLL 2, 4 or 8, TPT one of %s'
                           % ', '.join(str(t) for t in TPT_CANDIDATES))
        cfg = {'mr': mr, 'split': split, 'unroll': unroll}
        if tpt:
            cfg.update(tpt=tpt, tpt_threads=args.threads or os.cpu_count() or 1)
    elif args.autotune:
        path = args.tune_cache or default_cache_path()
        cache = load_cache(path, cpu_key())
        cfg = tune_gemm(args.m, args.n, args.k, cache, log, args.dtype,
                        args.threads or os.cpu_count() or 1)
        if cache.pop('dirty', False):
            save_cache(path, cache)
    cfg = cfg or GEMM_DEFAULT
    banner = ['command: kern_gen.py ' + ' '.join(argv),
              'instance: gemm %s M=%d N=%d K=%d' % (args.dtype, args.m, args.n, args.k)] + log + [
              'blocking: mr=%d split=%d unroll=%d' % (cfg['mr'], cfg['split'], cfg['unroll']) + (
                  ', %d tasks per thread at %d threads' % (cfg['tpt'], cfg['tpt_threads'])
                  if cfg.get('tpt') else '')]
    write_atomic(args.out, emit_gemm(name, args.m, args.n, args.k, banner, cfg=cfg, dt=args.dtype))



# ----------------------------------------------------------------- autotune
# --autotune times candidate blockings of each GEMM instance on this
# machine (one compile of every candidate, then each timed), keeps the
# fastest and records it in a cache file keyed by the CPU (model name and
# the ISA features kern dispatches on) and by op + dtype + shape; the next
# run replays it without timing. Of the knobs, only `split` (two
# accumulator sets for tiles of at most that many rows) changes the
# summation order; `mr` (rows per tile) and `unroll` do not.
CACHE_FORMAT = 'kern-gen-autotune'
CACHE_VERSION = 3  # 2: the thread split ('tpt' per thread count) and fusion entries; 3: timed on
#                     the body a run takes (AVX-512 where the CPU has it), weights from memory,
#                     the Q/K/V choice per thread count
TPT_DEFAULT = 4    # column-panel tasks per thread when nothing is tuned
TPT_CANDIDATES = (1, 2, 4, 8, 16)
QKV_APART_MARGIN = 0.97  # linears stay apart only when that is 3 % faster than merged
TUNE_MARGIN = 1.03       # a blocking or split replaces the default only when 3 % faster
TUNE_CANDIDATES = [
    {'mr': 6, 'split': 3, 'unroll': 4}, {'mr': 6, 'split': 3, 'unroll': 8},
    {'mr': 6, 'split': 0, 'unroll': 4}, {'mr': 5, 'split': 3, 'unroll': 4},
    {'mr': 4, 'split': 3, 'unroll': 4}, {'mr': 4, 'split': 4, 'unroll': 8},
    {'mr': 3, 'split': 3, 'unroll': 4}, {'mr': 2, 'split': 2, 'unroll': 8},
]
CPU_FEATURES = ('avx2', 'fma', 'f16c', 'avx_vnni', 'avx512f', 'avx512bw', 'avx512vl', 'avx512dq',
                'avx512_vnni', 'avx512_bf16', 'asimd', 'asimddp', 'bf16')


def cpu_key():
    model, flags = 'unknown', set()
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                k, _, v = line.partition(':')
                k = k.strip()
                if k in ('model name', 'CPU part') and model == 'unknown':
                    model = ' '.join(v.split())
                elif k in ('flags', 'Features') and not flags:
                    flags = set(v.split())
    except OSError:
        pass
    return '%s | %s' % (model, ' '.join(f for f in CPU_FEATURES if f in flags) or 'no simd')


def default_cache_path():
    base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
    return os.path.join(base, 'kern', 'gen_autotune.json')


def load_cache(path, cpu):
    import json
    empty = {'format': CACHE_FORMAT, 'version': CACHE_VERSION, 'cpu': cpu, 'entries': {},
             '_dir': os.path.dirname(os.path.abspath(path))}
    if not os.path.exists(path):
        return empty
    try:
        with open(path) as f:
            c = json.load(f)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise GenError('autotune cache %s is corrupt (%s); delete it or name another with '
                       '--tune-cache' % (path, str(e).split('\n')[0]))
    if not isinstance(c, dict) or c.get('format') != CACHE_FORMAT:
        raise GenError('autotune cache %s is not a kern_gen.py autotune cache' % path)
    if c.get('version') != CACHE_VERSION:
        raise GenError('autotune cache %s has format version %r; this kern_gen.py reads version '
                       '%d (delete it to tune again)' % (path, c.get('version'), CACHE_VERSION))
    if c.get('cpu') != cpu:
        raise GenError("autotune cache %s was written on another CPU ('%s'; this one is '%s')"
                       % (path, c.get('cpu'), cpu))
    ent = c.get('entries')
    if not isinstance(ent, dict):
        raise GenError('autotune cache %s is corrupt (no entries)' % path)
    for k, v in ent.items():
        if k.startswith('fuse/'):
            ok = isinstance(v, dict) and isinstance(v.get('merge'), bool)
        elif k.startswith('qlinear/'):
            ok = (isinstance(v, dict) and isinstance(v.get('mr'), int) and 1 <= v['mr'] <= 3 and
                  v.get('unroll') in (1, 2, 4, 8))
        elif k.startswith('dattn/'):
            ok = (isinstance(v, dict) and isinstance(v.get('instance'), bool) and
                  v.get('split', DA_SPLIT) in DA_SPLITS)
        else:
            tp = v.get('tpt', {}) if isinstance(v, dict) else None
            ok = (isinstance(v, dict) and all(isinstance(v.get(x), int) for x in ('mr', 'split', 'unroll'))
                  and 1 <= v['mr'] <= 6 and 0 <= v['split'] <= 6 and v['unroll'] in (2, 4, 8)
                  and isinstance(tp, dict) and all(
                      isinstance(t, str) and t.isdigit() and tp[t] in TPT_CANDIDATES for t in tp))
        if not ok:
            raise GenError("autotune cache %s is corrupt (entry '%s')" % (path, k))
    c['_dir'] = os.path.dirname(os.path.abspath(path))
    return c


def save_cache(path, c):
    import json
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    keep = {k: c[k] for k in ('format', 'version', 'cpu', 'entries')}
    write_atomic(path, json.dumps(keep, indent=1, sort_keys=True) + '\n')


TUNE_INCLUDES = ['#include "kern.h"', '#include <stdio.h>', '#include <stdlib.h>', '#include <time.h>',
                 '#include <math.h>', '#include <string.h>', '#ifdef KERN_X86', '#include <immintrin.h>',
                 '#endif']


def tune_main(threads, decls=()):
    """A timing program's main up to a kern context of `threads` threads
    (ctx), with the declarations decls first."""
    return (['int main(void) {', '    kern_ctx_params p;', '    kern_ctx *ctx = NULL;'] +
            ['    %s' % d for d in decls] +
            ['    memset(&p, 0, sizeof p);', '    p.n_threads = %d;' % threads,
             '    if (kern_ctx_create(&p, &ctx)) return 1;'])


TUNE_FLUSH = [
    '/* the packed weight out of every cache before a timed run: in a model',
    ' * each weight is read once a forward, from memory */',
    'static void flush(const void *p, size_t n) {',
    '#ifdef KERN_X86',
    '    for (size_t i = 0; i < n; i += 64) _mm_clflush((const char *)p + i);',
    '    _mm_mfence();',
    '#else',
    '    (void)p;',
    '    (void)n;',
    '#endif',
    '}']
TUNE_TIMER = ['static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); '
              'return t.tv_sec + t.tv_nsec * 1e-9; }'] + TUNE_FLUSH


def time_gemm_candidates(M, N, K, cands, dt='f32'):
    """Compiles every candidate in one program and times each (best of up
    to 5 runs); returns microseconds per candidate. bf16: the panels from
    x already widened (what a run times after its one conversion)."""
    import shutil
    import subprocess
    import time
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    cc = os.environ.get('CC') or 'cc'
    d = tempfile.mkdtemp(prefix='kern_gen_tune.')
    NPK = ((N + GEMM_NR - 1) // GEMM_NR) * K * GEMM_NR  # the packed weight's elements
    try:
        src = list(TUNE_INCLUDES)
        if dt == 'bf16':  # referenced by the panels, never called here (no epilogue)
            src.append('void kern__epilogue_apply_tile(kern_ctx *ctx, const float *t, int64_t ldt, void *y, '
                       'kern_dtype ydt, int64_t ldy, int64_t i0, int64_t m, int64_t j0, int64_t n, '
                       'float alpha, const kern_epilogue *epi) { (void)ctx; (void)t; (void)ldt; (void)y; '
                       '(void)ydt; (void)ldy; (void)i0; (void)m; (void)j0; (void)n; (void)alpha; (void)epi; }')
        for i, c in enumerate(cands):
            src.append(emit_gemm('t%d' % i, M, N, K, [], impl_only=True, cfg=c, dt=dt))
        src += TUNE_TIMER
        src.append('int main(void) {')
        src.append('    float *x = (float *)aligned_alloc(64, (size_t)%d * 4 + 64);' % (M * K))
        src.append('    float *w = (float *)aligned_alloc(64, (size_t)%d * 4 + 64);' % (N * K))
        src.append('    float *y = (float *)aligned_alloc(64, (size_t)%d * 4 + 64);' % (M * N))
        src.append('    float *pk = (float *)aligned_alloc(64, (size_t)%d * 4 + 64);' % NPK)
        src.append('    if (!x || !w || !y || !pk) return 1;')
        src.append('    for (int64_t i = 0; i < %d; i++) x[i] = (float)(i %% 17) * 0.01f;' % (M * K))
        src.append('    for (int64_t i = 0; i < %d; i++) w[i] = (float)(i %% 13) * 0.01f;' % (N * K))
        if dt == 'bf16':
            src.append('    uint16_t *wb = (uint16_t *)aligned_alloc(64, (size_t)%d * 2 + 64);' % (N * K))
            src.append('    uint16_t *yb = (uint16_t *)aligned_alloc(64, (size_t)%d * 2 + 64);' % (M * N))
            src.append('    uint16_t *pb = (uint16_t *)aligned_alloc(64, (size_t)%d * 2 + 64);' % NPK)
            src.append('    if (!wb || !yb || !pb) return 1;')
            src.append('    for (int64_t i = 0; i < %d; i++) wb[i] = kern_f32_to_bf16(w[i]);' % (N * K))
            src.append('    t0_pack(wb, pb);')
        else:
            src.append('    t0_pack(w, pk);')
        # the body a run takes on this CPU (the context's level: AVX-512
        # from F/BW/VL/DQ, else AVX2 + FMA, else the scalar twin)
        src.append('    int avx2 = 0, avx512 = 0;')
        src.append('#ifdef KERN_X86')
        src.append('    avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");')
        src.append('    avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&')
        src.append('             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");')
        src.append('#endif')
        for i in range(len(cands)):
            src.append('    {')
            if dt == 'bf16':
                src.append('        t%d__args a;' % i)
                src.append('        memset(&a, 0, sizeof a);')
                src.append('        a.x = x;')
                src.append('        a.packed = pb;')
                src.append('        a.y = yb;')
            src.append('        double best = 1e30, spent = 0;')
            src.append('        for (int r = 0; r < 6 && (r < 2 || spent < 0.25); r++) {')
            src.append('            flush(%s, (size_t)%d);' % ('pb' if dt == 'bf16' else 'pk',
                                                         NPK * (2 if dt == 'bf16' else 4)))
            src.append('            double t = now();')
            src.append('#ifdef KERN_X86')
            pargs = '&a' if dt == 'bf16' else 'x, pk, NULL, y'
            src.append('            if (avx512) t%d__panels_avx512(%s, 0, %d); else' % (
                i, pargs, (N + GEMM_NR - 1) // GEMM_NR))
            src.append('            if (avx2) t%d__panels_avx2(%s, 0, %d); else' % (
                i, pargs, (N + GEMM_NR - 1) // GEMM_NR))
            src.append('#endif')
            src.append('            t%d__panels_scalar(%s, 0, %d);' % (
                i, pargs, (N + GEMM_NR - 1) // GEMM_NR))
            src.append('            t = now() - t;')
            src.append('            spent += t;')
            src.append('            if (r && t < best) best = t;')
            src.append('        }')
            src.append('        printf("%%d %%.3f\\n", %d, best * 1e6);' % i)
            src.append('    }')
        src.append('    return (int)y[0] == 12345%s;' % (' + yb[0]' if dt == 'bf16' else ''))
        src.append('}')
        return run_tune_program(d, src, len(cands))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_tune_program(d, src, n, kern_obj=None):
    """Compiles src in d (against this checkout's headers, and kern's
    implementation object when the program calls kern), runs it and reads
    'i microseconds' lines for candidates 0 .. n-1."""
    import subprocess
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    cc = os.environ.get('CC') or 'cc'
    with open(os.path.join(d, 'tune.c'), 'w') as f:
        f.write('\n'.join(src) + '\n')
    cmd = [cc, '-O2', '-std=c11', '-D_GNU_SOURCE', '-w', '-I' + os.path.join(root, 'include'),
           '-I' + os.path.join(root, 'kernels'), os.path.join(d, 'tune.c')] + (
           [kern_obj] if kern_obj else []) + ['-o', os.path.join(d, 'tune'), '-lm', '-lpthread']
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    if r.returncode:
        raise GenError('autotune: compiling the candidates failed (%s):\n%s' % (
            ' '.join(cmd[:2]), r.stdout[-2000:]))
    r = subprocess.run([os.path.join(d, 'tune')], stdout=subprocess.PIPE,
                       universal_newlines=True)
    times = {}
    for line in r.stdout.splitlines():
        i, us = line.split()
        times[int(i)] = float(us)
    if len(times) != n:
        raise GenError('autotune: the timing program failed (exit %d)' % r.returncode)
    return [times[i] for i in range(n)]


def kern_impl_object(cache_dir):
    """kern's implementation as one object, for timing programs that run
    on its thread pool: build/gen/kern_impl.o of this checkout when it is
    newer than every header (make test builds it), else one compiled once
    into the cache's folder, named by a hash of the compiler and the
    headers (about half a minute, then reused)."""
    import glob
    import hashlib
    import subprocess
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
    hdrs = sorted(glob.glob(os.path.join(root, 'include', '*.h')) +
                  glob.glob(os.path.join(root, 'kernels', '*.h')))
    newest = max(os.path.getmtime(h) for h in hdrs)
    built = os.path.join(root, 'build', 'gen', 'kern_impl.o')
    if os.path.exists(built) and os.path.getmtime(built) >= newest:
        return built
    cc = os.environ.get('CC') or 'cc'
    h = hashlib.sha256(cc.encode())
    for p in hdrs:
        with open(p, 'rb') as f:
            h.update(os.path.basename(p).encode() + b'\0' + f.read())
    obj = os.path.join(cache_dir, 'kern_impl-%s.o' % h.hexdigest()[:16])
    if os.path.exists(obj):
        return obj
    os.makedirs(cache_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix='.kern_impl.', suffix='.c', dir=cache_dir)
    try:
        with os.fdopen(fd, 'w') as f:
            f.write('#define KERN_IMPLEMENTATION\n#include "kern.h"\n')
        r = subprocess.run([cc, '-O2', '-std=c11', '-D_GNU_SOURCE', '-w', '-I' + os.path.join(root, 'include'),
                            '-I' + os.path.join(root, 'kernels'), '-c', tmp, '-o', tmp + '.o'],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        if r.returncode:
            raise GenError('autotune: compiling kern for the timing programs failed:\n%s' % r.stdout[-2000:])
        os.replace(tmp + '.o', obj)
    finally:
        for t in (tmp, tmp + '.o'):
            if os.path.exists(t):
                os.unlink(t)
    return obj


def tune_timed(i, warm, before, call):
    """A timing program's block for candidate i: `warm` once, then up to 8
    runs (at least 3, until a quarter second is spent) of `call`, each
    after the statements `before` (the flushes); prints 'i best-us'."""
    return (['    {', '        double best = 1e30, spent = 0;', '        %s' % warm,
             '        for (int r = 0; r < 8 && (r < 3 || spent < 0.25); r++) {'] +
            ['            %s' % b for b in before] +
            ['            double t = now();', '            %s;' % call, '            t = now() - t;',
             '            spent += t;', '            if (t < best) best = t;', '        }',
             '        printf("%%d %%.3f\\n", %d, best * 1e6);' % i, '    }'])


def time_gemm_threads(M, N, K, dt, cfg, threads, tpts, kern_obj):
    """The instance with blocking cfg and each thread split in tpts, run
    whole (NAME__run_epi) on a kern context of `threads` threads; best of up
    to 8 runs each, microseconds."""
    import shutil
    d = tempfile.mkdtemp(prefix='kern_gen_tune.')
    try:
        NPK = ((N + GEMM_NR - 1) // GEMM_NR) * K * GEMM_NR
        et = 'uint16_t' if dt == 'bf16' else 'float'
        src = list(TUNE_INCLUDES)
        for i, t in enumerate(tpts):
            src.append(emit_gemm('t%d' % i, M, N, K, [], impl_only=True,
                                 cfg=dict(cfg, tpt=t, tpt_threads=threads), dt=dt))
        src += TUNE_TIMER + tune_main(threads) + [
                '    %s *x = (%s *)aligned_alloc(64, (size_t)%d * 4 + 64);' % (et, et, M * K),
                '    %s *w = (%s *)aligned_alloc(64, (size_t)%d * 4 + 64);' % (et, et, N * K),
                '    %s *y = (%s *)aligned_alloc(64, (size_t)%d * 4 + 64);' % (et, et, M * N),
                '    %s *pk = (%s *)aligned_alloc(64, (size_t)%d * 4 + 64);' % (et, et, NPK),
                '    float *xb = (float *)aligned_alloc(64, (size_t)%d * 4 + 64);' % (M * K),
                '    if (!x || !w || !y || !pk || !xb) return 1;',
                '    for (int64_t i = 0; i < %d; i++) x[i] = %s;' % (
                    M * K, 'kern_f32_to_bf16((float)(i % 17) * 0.01f)' if dt == 'bf16' else '(float)(i % 17) * 0.01f'),
                '    for (int64_t i = 0; i < %d; i++) w[i] = %s;' % (
                    N * K, 'kern_f32_to_bf16((float)(i % 13) * 0.01f)' if dt == 'bf16' else '(float)(i % 13) * 0.01f'),
                '    t0_pack(w, pk);']
        for i in range(len(tpts)):
            call = 't%d__run_epi(ctx, x, pk, NULL, y, NULL, 1.0f, xb)' % i
            src += tune_timed(i, call + ';', ['flush(pk, (size_t)%d);' % (NPK * (2 if dt == 'bf16' else 4))],
                              call)
        src += ['    kern_ctx_destroy(ctx);', '    return (int)y[0] == 12345;', '}']
        return run_tune_program(d, src, len(tpts), kern_obj)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tune_pick(us, default):
    """The index of the fastest time in us, unless the default's (index
    default) is within TUNE_MARGIN of it: the defaults are the choices
    measured in models on the machines kern was tuned on, and a candidate
    that wins an isolated timing by less than its noise lost in the model
    (BERT-base L 32 on the Xeon: mr 4 for the 3072-column instance, 1-3 %
    faster alone, made the model 2-3 % slower)."""
    best = min(range(len(us)), key=lambda i: us[i])
    return default if us[default] <= TUNE_MARGIN * us[best] else best


def tune_gemm(M, N, K, cache, log, dt='f32', threads=1):
    """The fastest blocking for this instance, then (threads > 1) the fastest
    thread split for it on kern's pool: from the cache, else timed."""
    c = tune_gemm_blocking(M, N, K, cache, log, dt)
    if threads <= 1 or (N + GEMM_NR - 1) // GEMM_NR < 2:
        return c
    import time
    key = 'gemm/%s/M%d/N%d/K%d' % (dt, M, N, K)
    ent = cache['entries'][key]
    tp = ent.setdefault('tpt', {})
    if str(threads) in tp:
        log.append('autotune: %s: %d tasks per thread at %d threads (cache)' % (
            key, tp[str(threads)], threads))
        return dict(c, tpt=tp[str(threads)], tpt_threads=threads)
    t0 = time.time()
    us = time_gemm_threads(M, N, K, dt, c, threads, TPT_CANDIDATES,
                           kern_impl_object(cache['_dir']))
    best = tune_pick(us, TPT_CANDIDATES.index(TPT_DEFAULT))
    tp[str(threads)] = TPT_CANDIDATES[best]
    cache['dirty'] = True
    log.append('autotune: %s: %d tasks per thread at %d threads, %.1f us (%s; %.1f s)' % (
        key, TPT_CANDIDATES[best], threads, us[best],
        ', '.join('%d: %.0f' % (t, u) for t, u in zip(TPT_CANDIDATES, us)), time.time() - t0))
    return dict(c, tpt=TPT_CANDIDATES[best], tpt_threads=threads)


def time_qlinear_candidates(M, N, K, cands, threads, kern_obj):
    """Each qlinear blocking in cands run whole (x quantized, the panels over
    a kern context of `threads` threads, the packed weight flushed before
    each run: a model reads each weight once a forward); best of up to 8
    runs each, microseconds."""
    import shutil
    d = tempfile.mkdtemp(prefix='kern_gen_tune.')
    try:
        PB = qlinear_packed_bytes(N, K)
        WB = 3 * M * ((K + 3) // 4 * 4) + M * 8
        src = list(TUNE_INCLUDES)
        for i, c in enumerate(cands):
            src.append(emit_qlinear('t%d' % i, M, N, K, [], impl_only=True, cfg=c, pack_t=False))
        src += TUNE_TIMER + tune_main(threads) + [
                '    float *x = (float *)aligned_alloc(64, (size_t)%d * 4 + 64);' % (M * K),
                '    float *y = (float *)aligned_alloc(64, (size_t)%d * 4 + 64);' % (M * N),
                '    float *sc = (float *)aligned_alloc(64, (size_t)%d * 4 + 64);' % N,
                '    int8_t *wq = (int8_t *)aligned_alloc(64, (size_t)%d + 64);' % (N * K),
                '    int8_t *pk = (int8_t *)aligned_alloc(64, (size_t)%d + 64);' % PB,
                '    void *work = aligned_alloc(64, (size_t)%d + 64);' % WB,
                '    if (!x || !y || !sc || !wq || !pk || !work) return 1;',
                '    for (int64_t i = 0; i < %d; i++) x[i] = (float)(i %% 17) * 0.01f - 0.08f;' % (M * K),
                '    for (int64_t i = 0; i < %d; i++) wq[i] = (int8_t)(i %% 251 - 125);' % (N * K),
                '    for (int64_t i = 0; i < %d; i++) sc[i] = 0.01f;' % N,
                '    t0_pack_int8(wq, sc, pk);']
        for i in range(len(cands)):
            call = 't%d__run_epi(ctx, x, pk, y, NULL, work)' % i
            src += tune_timed(i, 'if (%s) return 2;' % call, ['flush(pk, (size_t)%d);' % PB], call)
        src += ['    kern_ctx_destroy(ctx);', '    return (int)y[0] == 12345;', '}']
        return run_tune_program(d, src, len(cands), kern_obj)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tune_qlinear(M, N, K, cache, log, threads=1):
    """The fastest blocking (rows per tile, K unroll) of a qlinear instance
    at `threads` threads: from the cache (entry qlinear/M/N/K/tT), else
    timed (QL_DEFAULT unless another is TUNE_MARGIN faster)."""
    import time
    key = 'qlinear/M%d/N%d/K%d/t%d' % (M, N, K, threads)
    hit = cache['entries'].get(key)
    if hit:
        log.append('autotune: %s: mr=%d unroll=%d (cache)' % (key, hit['mr'], hit['unroll']))
        return {'mr': hit['mr'], 'unroll': hit['unroll']}
    K4 = (K + 3) // 4
    cands, seen = [], set()
    for c in [dict(QL_DEFAULT)] + [{'mr': mr, 'unroll': u} for mr in (1, 2, 3) for u in (1, 2, 4, 8)]:
        sig = (tuple(gemm_rows(M, c['mr'])), min(c['unroll'], K4))
        if sig not in seen:
            seen.add(sig)
            cands.append(c)
    t0 = time.time()
    us = time_qlinear_candidates(M, N, K, cands, threads, kern_impl_object(cache['_dir']))
    best = tune_pick(us, 0)  # cands[0] is QL_DEFAULT
    c = cands[best]
    cache['entries'][key] = dict(c, us=round(us[best], 3), candidates=len(cands))
    cache['dirty'] = True
    log.append('autotune: %s: mr=%d unroll=%d, %.1f us (the default %.1f us; %d candidates, %.1f s)' % (
        key, c['mr'], c['unroll'], us[best], us[0], len(cands), time.time() - t0))
    return dict(c)


def qkv_tuner(cache, log, spec_max_m, threads=1):
    """--autotune's fusion choice for the Q/K/V merge of linears that run
    as GEMM instances (at most spec_max_m rows, f32 or bf16): one instance
    over the concatenated weights against the parts' instances one after
    the other, each run whole (x packed, the panels over a kern context of
    `threads` threads, the weights from memory) with the default blocking
    and split; the faster form is kept (cache entry fuse/qkv/...). Timing
    the panels alone on one thread chose 'apart' for BERT-base's Q/K/V at
    M 16, which ran slower in the model at two threads (three dispatches,
    three x packs). Linears past spec_max_m run on kern_gemm and merge as
    the executor merges them."""
    import time

    seen = set()

    def decide(M, K, Ns, dt):
        if not (1 <= M <= spec_max_m) or dt not in ('f32', 'bf16'):
            return True
        key = 'fuse/qkv/%s/M%d/K%d/N%s/t%d' % (dt, M, K, '+'.join(str(n) for n in Ns), threads)
        hit = cache['entries'].get(key)
        if hit:
            if key not in seen:
                log.append('autotune: %s: %s (cache)' % (key, 'merged' if hit['merge'] else 'apart'))
            seen.add(key)
            return hit['merge']
        t0 = time.time()
        obj = kern_impl_object(cache['_dir'])

        def whole(n):
            return time_gemm_threads(M, n, K, dt, GEMM_DEFAULT, threads, (TPT_DEFAULT,), obj)[0]
        merged = whole(sum(Ns))
        part = {n: whole(n) for n in sorted(set(Ns))}
        apart = sum(part[n] for n in Ns)
        # apart must win by more than the timing's noise: merging is the
        # executor's choice, and one GEMM is one call and one thread split
        merge = not apart < QKV_APART_MARGIN * merged
        cache['entries'][key] = {'merge': merge, 'us_merged': round(merged, 3),
                                 'us_apart': round(apart, 3)}
        cache['dirty'] = True
        seen.add(key)
        log.append('autotune: %s: %s (one GEMM %.1f us, apart %.1f us; %.1f s)' % (
            key, 'merged' if merge else 'apart', merged, apart, time.time() - t0))
        return merge
    return decide


def extent(shape, stride):
    """Elements from a view's first to its last (non-negative strides)."""
    return 1 + sum((a - 1) * b for a, b in zip(shape, stride))


def time_decode_attn(key, threads, kern_obj, splits=None):
    """The decode-attention instance for key, one per split in splits,
    against kern_decode_attention on the same tensors (every sequence at
    Lmax cached rows, the caches flushed before each run: a decoder reads
    each layer's cache from memory), on a kern context of `threads`
    threads; best of up to 8 runs each, microseconds [the instances in
    splits' order..., library]."""
    import shutil
    (B, LQ, H, HKV, D, DV, LMAX, qdt, kdt, vdt, ldt, strides, scale2, hks, hvs) = key
    splits = splits or (DA_SPLIT,)
    d = tempfile.mkdtemp(prefix='kern_gen_tune.')
    try:
        shapes = ([B, LQ, H, D], [B, LMAX, HKV, D], [B, LMAX, HKV, DV], [B, LQ, H, DV], [B],
                  [B, LMAX, HKV], [B, LMAX, HKV])
        dts = (qdt, kdt, vdt, qdt, ldt, 'f32', 'f32')
        names = ('q', 'k', 'v', 'y', 'l', 'ks', 'vs')
        src = list(TUNE_INCLUDES)
        for i, sp in enumerate(splits):
            src.append(emit_decode_attn('t%d' % i, key, sp))
        src += TUNE_TIMER + [
                'static void view(kern_tensor *t, void *p, kern_dtype dt, int nd, const int64_t *sh, '
                'const int64_t *st) {',
                '    memset(t, 0, sizeof *t);',
                '    t->data = p;',
                '    t->dtype = dt;',
                '    t->ndim = nd;',
                '    for (int i = 0; i < nd; i++) { t->shape[i] = sh[i]; t->stride[i] = st[i]; }',
                '}',
                ] + tune_main(threads, ['kern_tensor tv[7];', 'kern_decode_attention_params dp;']) + [
                '    memset(&dp, 0, sizeof dp);',
                '    float *part = (float *)aligned_alloc(64, (size_t)%d * 4 + 64);' % (
                    B * max(1, (LMAX + min(splits) - 1) // min(splits)) * H * LQ * (DV + 2))]
        for i, (nm, sh, dt, st) in enumerate(zip(names, shapes, dts, strides)):
            ext = extent(sh, st)
            es = DTYPES[dt][1]
            src += ['    static const int64_t sh_%s[] = {%s}, st_%s[] = {%s};' % (
                        nm, ', '.join(map(str, sh)), nm, ', '.join(map(str, st))),
                    '    unsigned char *%s = (unsigned char *)aligned_alloc(64, (size_t)%d + 64);' % (nm, ext * es),
                    '    if (!%s) return 1;' % nm,
                    '    for (int64_t i = 0; i < %d; i++) %s[i] = (unsigned char)(i * 7 %% 61);' % (ext * es, nm),
                    '    view(&tv[%d], %s, %s, %d, sh_%s, st_%s);' % (i, nm, DTYPES[dt][0], len(sh), nm, nm)]
            if dt == 'f32' and nm != 'y':
                src.append('    for (int64_t i = 0; i < %d; i++) ((float *)%s)[i] = (float)(i %% 29) * 0.01f;' % (ext, nm))
            if dt in ('bf16', 'f16'):
                src.append('    for (int64_t i = 0; i < %d; i++) ((uint16_t *)%s)[i] = %s((float)(i %% 29) * 0.01f);' % (
                    ext, nm, 'kern_f32_to_bf16' if dt == 'bf16' else 'kern_f32_to_f16'))
            if nm == 'l':
                src.append('    for (int64_t i = 0; i < %d; i++) ((%s *)l)[i * %d] = %d;' % (
                    B, 'int64_t' if ldt == 'i64' else 'int32_t', st[0], LMAX))
        if hks:
            src.append('    dp.k_scale = &tv[5];')
        if hvs:
            src.append('    dp.v_scale = &tv[6];')
        src.append('    dp.scale = %s;' % c_float(scale2 / 1.4426950408889634))
        calls = ['t%d_run(ctx, (const %s *)q, (const %s *)k, (const %s *)v, (const %s *)l, %s, %s, '
                 '(%s *)y, part)' % (i, CTYPE[qdt], CTYPE[kdt], CTYPE[vdt], CTYPE[ldt],
                                     '(const float *)ks' if hks else 'NULL',
                                     '(const float *)vs' if hvs else 'NULL', CTYPE[qdt])
                 for i in range(len(splits))]
        calls.append('kern_decode_attention(ctx, &tv[0], &tv[1], &tv[2], &tv[4], &tv[3], &dp)')
        kbytes = extent(shapes[1], strides[1]) * DTYPES[kdt][1]
        vbytes = extent(shapes[2], strides[2]) * DTYPES[vdt][1]
        for i, call in enumerate(calls):
            src += tune_timed(i, 'if (%s) return 2;' % call,
                              ['flush(k, (size_t)%d);' % kbytes, 'flush(v, (size_t)%d);' % vbytes], call)
        src += ['    kern_ctx_destroy(ctx);', '    return y[0] == 255 && part[0] == 12345.0f;', '}']
        return run_tune_program(d, src, len(calls), kern_obj)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def da_splits(LMAX):
    """The splits --autotune times for a cache of LMAX rows: DA_SPLITS, each
    that makes a different number of tasks (DA_SPLIT always)."""
    out, seen = [], set()
    for sp in (DA_SPLIT,) + tuple(x for x in DA_SPLITS if x != DA_SPLIT):
        ns = max(1, (LMAX + sp - 1) // sp)
        if ns not in seen:
            seen.add(ns)
            out.append(sp)
    return out


def da_tuner(cache, log, threads=1, library=True):
    """--autotune's choice for each decode_attention that fits an instance:
    the split (cache rows per task: da_splits, DA_SPLIT unless another is
    TUNE_MARGIN faster), and instance or kern_decode_attention (the
    instance unless the library is TUNE_MARGIN faster than it; library
    False: always the instance, for the standalone command), each timed
    here by time_decode_attn. The decision returned: the split, or 0 for
    the library. Cache entry dattn/...: the times and both choices."""
    import time

    def decide(key):
        (B, LQ, H, HKV, D, DV, LMAX, qdt, kdt, vdt, ldt, strides, scale2, hks, hvs) = key
        ck = 'dattn/%s/%s/%s/B%d/Lq%d/H%d/Hkv%d/D%d/Dv%d/L%d/t%d' % (
            qdt, kdt, vdt, B, LQ, H, HKV, D, DV, LMAX, threads)
        hit = cache['entries'].get(ck)  # (load_cache checked its form)
        if hit is not None and 'split' in hit:
            inst = hit['instance'] or not library
            log.append('autotune: %s: %s (cache)' % (
                ck, 'instance, split %d' % hit['split'] if inst else 'library'))
            return hit['split'] if inst else 0
        t0 = time.time()
        sps = da_splits(LMAX)
        us = time_decode_attn(key, threads, kern_impl_object(cache['_dir']), sps)
        bi = tune_pick(us[:-1], 0)
        inst = tune_pick([us[bi], us[-1]], 0) == 0
        cache['entries'][ck] = {'instance': inst, 'split': sps[bi], 'us_instance': round(us[bi], 3),
                                'us_library': round(us[-1], 3),
                                'us_splits': dict(('%d' % sp, round(t, 3)) for sp, t in zip(sps, us))}
        cache['dirty'] = True
        inst = inst or not library
        log.append('autotune: %s: %s (%s; kern_decode_attention %.1f us; %.1f s)' % (
            ck, 'instance, split %d' % sps[bi] if inst else 'library',
            ', '.join('split %d %.1f us' % (sp, t) for sp, t in zip(sps, us)), us[-1],
            time.time() - t0))
        return sps[bi] if inst else 0
    return decide


def tune_gemm_blocking(M, N, K, cache, log, dt='f32'):
    """The fastest blocking for this instance: from the cache, else timed."""
    import time
    key = 'gemm/%s/M%d/N%d/K%d' % (dt, M, N, K)
    hit = cache['entries'].get(key)
    if hit:
        log.append('autotune: %s: mr=%d split=%d unroll=%d (cache)' % (
            key, hit['mr'], hit['split'], hit['unroll']))
        return {'mr': hit['mr'], 'split': hit['split'], 'unroll': hit['unroll']}
    cands, seen = [], set()
    for c in TUNE_CANDIDATES:
        rows = gemm_rows(M, c['mr'])
        sig = (tuple(rows), tuple(r <= c['split'] and K >= 2 for _, r in rows), min(c['unroll'], K))
        if sig not in seen:
            seen.add(sig)
            cands.append(c)
    t0 = time.time()
    us = time_gemm_candidates(M, N, K, cands, dt)
    best = tune_pick(us, 0)  # cands[0] is GEMM_DEFAULT
    c = dict(cands[best])
    cache['entries'][key] = dict(c, us=round(us[best], 3), candidates=len(cands))
    cache['dirty'] = True
    log.append('autotune: %s: mr=%d split=%d unroll=%d, %.1f us (%d candidates, %.1f s)' % (
        key, c['mr'], c['split'], c['unroll'], us[best], len(cands), time.time() - t0))
    return c



# ------------------------------------------------------------- safetensors
ST_DTYPES = {'F32': 'f32', 'F16': 'f16', 'BF16': 'bf16', 'I8': 'i8', 'U8': 'u8', 'I32': 'i32',
             'I64': 'i64', 'BOOL': 'bool'}


def read_safetensors(path):
    """The header of a safetensors file: (header bytes, {name: (dtype,
    shape, begin, end)} with absolute file offsets, file size)."""
    import json
    try:
        size = os.path.getsize(path)
        with open(path, 'rb') as f:
            head = f.read(8)
            if len(head) != 8:
                raise GenError('safetensors %s: shorter than 8 bytes' % path)
            n = struct.unpack('<Q', head)[0]
            if n < 2 or n > 100 << 20 or 8 + n > size:
                raise GenError('safetensors %s: header length %d does not fit the file (%d bytes)'
                               % (path, n, size))
            hdr = f.read(n)
    except OSError as e:
        raise GenError('cannot read %s: %s' % (path, e.strerror))
    try:
        j = json.loads(hdr.decode('utf-8'))
    except (ValueError, UnicodeDecodeError) as e:
        raise GenError('safetensors %s: the header is not JSON (%s)' % (path, str(e).split('\n')[0]))
    if not isinstance(j, dict):
        raise GenError('safetensors %s: the header is not a JSON object' % path)
    out = {}
    for name, e in j.items():
        if name == '__metadata__':
            continue
        ok = (isinstance(e, dict) and e.get('dtype') in ST_DTYPES and
              isinstance(e.get('shape'), list) and all(isinstance(d, int) and d >= 0 for d in e['shape'])
              and isinstance(e.get('data_offsets'), list) and len(e['data_offsets']) == 2 and
              all(isinstance(d, int) for d in e['data_offsets']))
        if not ok:
            raise GenError("safetensors %s: entry '%s' is not {dtype, shape, data_offsets} "
                           "of a known dtype" % (path, name))
        dt = ST_DTYPES[e['dtype']]
        b, en = e['data_offsets']
        if not (0 <= b <= en and 8 + n + en <= size and en - b == functools_prod(e['shape']) * DTYPES[dt][1]):
            raise GenError("safetensors %s: entry '%s' has data_offsets %s outside the file or not "
                           "of its shape's size" % (path, name, e['data_offsets']))
        out[name] = (dt, list(e['shape']), 8 + n + b, 8 + n + en)
    return hdr, out, size


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for c in bytearray(data):
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def bind_safetensors(low, path):
    hdr, ents, size = read_safetensors(path)
    offs = []
    for v in low.weights:
        e = ents.get(v.name)
        if e is None:
            raise GenError("safetensors %s: no tensor '%s' (a weight of the graph)" % (path, v.name))
        if e[0] != v.dtype or e[1] != v.shape:
            raise GenError("safetensors %s: '%s' is %s %s; the graph wants %s %s" % (
                path, v.name, e[0], e[1], v.dtype, v.shape))
        if e[2] % v.esize():
            raise GenError("safetensors %s: '%s' starts at byte %d, not a multiple of its %d-byte "
                           "elements" % (path, v.name, e[2], v.esize()))
        offs.append(e[2])
    low.st = {'path': path, 'hlen': len(hdr), 'hash': fnv1a64(hdr), 'offs': offs, 'size': size,
              'min': max([e[3] for e in ents.values()] + [8 + len(hdr)])}


def emit_st_decl(w, low, N, U):
    if not getattr(low, 'st', None):
        return
    st = low.st
    w('/* The weights straight from the safetensors file the model was generated')
    w(' * from (%s; its header is checked): file = the whole file in memory' % os.path.basename(st['path']).replace('*/', '* /'))
    w(' * (e.g. mmap), 8-byte aligned, outliving the model. */')
    w('#define %s_SAFETENSORS_MIN_SIZE ((size_t)%d)' % (U, st['min']))
    w('kern_status %s_prepare_safetensors(kern_ctx *ctx, const void *file, size_t size, %s_model *m);'
      % (N, N))


def emit_st_impl(w, low, N, U):
    if not getattr(low, 'st', None):
        return
    st = low.st
    w('')
    w('static const uint64_t %s__st_off[%s_N_WEIGHTS + 1] = {%s};' % (
        N, U, ', '.join(['%dull' % o for o in st['offs']] + ['0'])))
    w('')
    w('kern_status %s_prepare_safetensors(kern_ctx *ctx, const void *file, size_t size, %s_model *m) {'
      % (N, N))
    w('    const unsigned char *f = (const unsigned char *)file;')
    w('    const void *wp[%s_N_WEIGHTS + 1];' % U)
    w('    uint64_t n = 0, h = 0xcbf29ce484222325ull;')
    w('    int64_t i;')
    w('    if (!f || !m) return kern__err(KERN_ERR_ARG, "%s_prepare_safetensors: file or m is NULL");' % N)
    w('    if ((uintptr_t)f % 8)')
    w('        return kern__err(KERN_ERR_ARG, "%s_prepare_safetensors: file is not 8-byte aligned");' % N)
    w('    if (size < %s_SAFETENSORS_MIN_SIZE)' % U)
    w('        return kern__err(KERN_ERR_ARG, "%s_prepare_safetensors: %%llu bytes; the file it was "' % N)
    w('                         "generated from has at least %d", (unsigned long long)size);' % st['min'])
    w('    for (i = 0; i < 8; i++) n |= (uint64_t)f[i] << (8 * i);')
    w('    if (n != %dull)' % st['hlen'])
    w('        return kern__err(KERN_ERR_ARG, "%s_prepare_safetensors: header of %%llu bytes; the file "' % N)
    w('                         "it was generated from has %d", (unsigned long long)n);' % st['hlen'])
    w('    for (i = 0; i < %d; i++) {' % st['hlen'])
    w('        h ^= f[8 + i];')
    w('        h *= 0x100000001b3ull;')
    w('    }')
    w('    if (h != 0x%016xull)' % st['hash'])
    w('        return kern__err(KERN_ERR_ARG, "%s_prepare_safetensors: the header differs from the "' % N)
    w('                         "one it was generated from (%s)");' % c_str(os.path.basename(st['path'])))
    w('    for (i = 0; i < %s_N_WEIGHTS; i++) wp[i] = f + %s__st_off[i];' % (U, N))
    w('    wp[%s_N_WEIGHTS] = NULL;' % U)
    w('    return %s_prepare(ctx, wp, m);' % N)
    w('}')

# ---------------------------------------------------------- norm instances
def emit_norm(name, R, H, kind, eps, banner, impl_only=False):
    """y[R,H] = norm(x (+ residual)) (* weight) (+ bias), the sum kept in
    residual_out when given; layer (mean and variance in two passes) or rms.
    H a multiple of 8: 8 lanes accumulate, summed in one fixed order, so
    the AVX2 row and its scalar twin (fmaf, the same order) give the same
    bits. f32, one thread (rows are few where it is used)."""
    U = name.upper()
    o = []
    w = o.append
    sto = 'static ' if impl_only else ''
    layer = kind == 'layer'
    if impl_only:
        w('')
        w('/* norm instance %s R=%d H=%d eps=%s (kern_gen.py norm) */' % (kind, R, H, c_float(eps)))
    else:
        emit_banner(w, name, banner)
        w(' * y[%d,%d] = %s_norm(x + residual) * weight + bias, eps %s; residual,' % (
            R, H, kind, c_float(eps)))
        w(' * weight, bias and residual_out (where x + residual is written) may be')
        w(' * NULL; f32, contiguous rows, one thread; the ISA is the context\'s (AVX2')
        w(' * or the scalar twin, which gives the same bits). */')
        w('#ifndef %s_H' % U)
        w('#define %s_H' % U)
        w('#include "kern.h"')
        w('#define %s_ROWS %d' % (U, R))
        w('#define %s_HIDDEN %d' % (U, H))
        w('kern_status %s_run(kern_ctx *ctx, const float *x, const float *residual, const float *weight,' % name)
        w('                   const float *bias, float *y, float *residual_out);')
        emit_impl_open(w, U)
    hs = ['    {',
          '        float s4[4], s2[2];',
          '        int l;',
          '        for (l = 0; l < 4; l++) s4[l] = acc[l] + acc[l + 4];',
          '        for (l = 0; l < 2; l++) s2[l] = s4[l] + s4[l + 2];',
          '        %s = s2[0] + s2[1];',
          '    }']
    for isa in ('scalar', 'avx2'):
        isa_begin(w, isa)
        w('static void %s__row_%s(const float *x, const float *res, const float *wt, const float *bs,' % (name, isa))
        w('                         float *y, float *so) {')
        w('    float s, mean = 0.0f, rstd;')
        w('    int64_t j;')
        if isa == 'avx2':
            def hsum(dst):
                return ['    {',
                        '        __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));',
                        '        __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));',
                        '        %s = _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));' % dst,
                        '    }']
            w('    __m256 acc = _mm256_setzero_ps();')
            w('    for (j = 0; j < %d; j += 8) {' % H)
            w('        __m256 v = _mm256_loadu_ps(x + j);')
            w('        if (res) v = _mm256_add_ps(v, _mm256_loadu_ps(res + j));')
            w('        if (so) _mm256_storeu_ps(so + j, v);')
            w('        acc = %s;' % ('_mm256_add_ps(acc, v)' if layer else '_mm256_fmadd_ps(v, v, acc)'))
            w('    }')
            for l in hsum('s'):
                w(l)
            if layer:
                w('    mean = s / %d.0f;' % H)
                w('    acc = _mm256_setzero_ps();')
                w('    for (j = 0; j < %d; j += 8) {' % H)
                w('        __m256 v = so ? _mm256_loadu_ps(so + j) : _mm256_loadu_ps(x + j);')
                w('        if (res && !so) v = _mm256_add_ps(v, _mm256_loadu_ps(res + j));')
                w('        v = _mm256_sub_ps(v, _mm256_set1_ps(mean));')
                w('        acc = _mm256_fmadd_ps(v, v, acc);')
                w('    }')
                for l in hsum('s'):
                    w(l)
            w('    rstd = 1.0f / sqrtf(s / %d.0f + %s);' % (H, c_float(eps)))
            w('    for (j = 0; j < %d; j += 8) {' % H)
            w('        __m256 v = so ? _mm256_loadu_ps(so + j) : _mm256_loadu_ps(x + j);')
            w('        if (res && !so) v = _mm256_add_ps(v, _mm256_loadu_ps(res + j));')
            w('        v = _mm256_mul_ps(_mm256_sub_ps(v, _mm256_set1_ps(mean)), _mm256_set1_ps(rstd));')
            w('        if (wt && bs) v = _mm256_fmadd_ps(v, _mm256_loadu_ps(wt + j), _mm256_loadu_ps(bs + j));')
            w('        else if (wt) v = _mm256_mul_ps(v, _mm256_loadu_ps(wt + j));')
            w('        else if (bs) v = _mm256_add_ps(v, _mm256_loadu_ps(bs + j));')
            w('        _mm256_storeu_ps(y + j, v);')
            w('    }')
        else:
            w('    float acc[8];')
            w('    int l;')
            w('    memset(acc, 0, sizeof acc);')
            w('    for (j = 0; j < %d; j += 8)' % H)
            w('        for (l = 0; l < 8; l++) {')
            w('            float v = x[j + l];')
            w('            if (res) v = v + res[j + l];')
            w('            if (so) so[j + l] = v;')
            w('            acc[l] = %s;' % ('acc[l] + v' if layer else 'fmaf(v, v, acc[l])'))
            w('        }')
            for l in hs:
                w(l % ('s',) if '%s' in l else l)
            if layer:
                w('    mean = s / %d.0f;' % H)
                w('    memset(acc, 0, sizeof acc);')
                w('    for (j = 0; j < %d; j += 8)' % H)
                w('        for (l = 0; l < 8; l++) {')
                w('            float v = so ? so[j + l] : x[j + l];')
                w('            if (res && !so) v = v + res[j + l];')
                w('            v = v - mean;')
                w('            acc[l] = fmaf(v, v, acc[l]);')
                w('        }')
                for l in hs:
                    w(l % ('s',) if '%s' in l else l)
            w('    rstd = 1.0f / sqrtf(s / %d.0f + %s);' % (H, c_float(eps)))
            w('    for (j = 0; j < %d; j++) {' % H)
            w('        float v = so ? so[j] : x[j];')
            w('        if (res && !so) v = v + res[j];')
            w('        v = (v - mean) * rstd;')
            w('        if (wt && bs) v = fmaf(v, wt[j], bs[j]);')
            w('        else if (wt) v = v * wt[j];')
            w('        else if (bs) v = v + bs[j];')
            w('        y[j] = v;')
            w('    }')
        if not layer:
            w('    (void)mean;')
        w('}')
        isa_end(w, isa)
    emit_norm_run(w, name, U, sto, R, H, 'float', 'float', impl_only)
    return '\n'.join(o) + '\n'


def emit_norm_run(w, name, U, sto, R, H, xt, wt, impl_only):
    """A norm instance's NAME_run: its rows through the AVX2 row or the
    scalar twin, by the context's ISA (xt: x/y's C type, wt: weight's)."""
    w('')
    w('%skern_status %s_run(kern_ctx *ctx, const %s *x, const %s *residual, const %s *weight,' % (
        sto, name, xt, xt, wt))
    w('                   const %s *bias, %s *y, %s *residual_out) {' % (wt, xt, xt))
    w('    int64_t r;')
    w('    if (!x || !y) return kern__err(KERN_ERR_ARG, "%s_run: x or y is NULL");' % name)
    w('#ifdef KERN_X86')
    w('    if (kern_ctx_isa(ctx) >= KERN_ISA_AVX2 && kern_ctx_isa(ctx) < KERN_ISA_NEON) {')
    w('        for (r = 0; r < %d; r++)' % R)
    w('            %s__row_avx2(x + r * %d, residual ? residual + r * %d : NULL, weight, bias, y + r * %d,'
      % (name, H, H, H))
    w('                         residual_out ? residual_out + r * %d : NULL);' % H)
    w('        return KERN_OK;')
    w('    }')
    w('#endif')
    w('    (void)ctx;')
    w('    for (r = 0; r < %d; r++)' % R)
    w('        %s__row_scalar(x + r * %d, residual ? residual + r * %d : NULL, weight, bias, y + r * %d,'
      % (name, H, H, H))
    w('                       residual_out ? residual_out + r * %d : NULL);' % H)
    w('    return KERN_OK;')
    w('}')
    if not impl_only:
        emit_impl_close(w, U)


def emit_norm_bf16(name, R, H, kind, eps, wdt, banner, impl_only=False):
    """emit_norm for bf16 x, residual, y and residual_out; weight and bias
    bf16 or f32 (wdt), as the bf16 graphs store them. kern_norm's
    arithmetic where it matters: h = x + residual formed in f32 and
    normalized unrounded, residual_out = h rounded; weight and bias widened
    to f32, y = (h - mean) rstd w + b rounded once (nearest even, like
    kern_f32_to_bf16). Every output is written in the last pass, after its
    element's inputs were read, so y may be x and residual_out may be
    residual (in place, as kern_norm allows). The statistics are the f32
    instance's (8 lanes, one fixed order; kern_norm's shifted sums differ
    in the last bits), so the AVX2 row and its scalar twin give the same
    bits."""
    U = name.upper()
    o = []
    w = o.append
    sto = 'static ' if impl_only else ''
    layer = kind == 'layer'
    WT = 'uint16_t' if wdt == 'bf16' else 'float'
    if impl_only:
        w('')
        w('/* norm instance %s bf16 (weight %s) R=%d H=%d eps=%s (kern_gen.py norm) */' % (
            kind, wdt, R, H, c_float(eps)))
    else:
        emit_banner(w, name, banner)
        w(' * y[%d,%d] = %s_norm(x + residual) * weight + bias, eps %s; x, residual,' % (
            R, H, kind, c_float(eps)))
        w(' * y and residual_out (where x + residual is written) bf16, weight and bias')
        w(' * %s; residual, weight, bias and residual_out may be NULL. f32 arithmetic,' % wdt)
        w(' * each output rounded to nearest even once; y may be x and residual_out')
        w(' * residual (in place), no other overlap. Contiguous rows, one thread; the')
        w(' * ISA is the context\'s (AVX2 or the scalar twin, which gives the same')
        w(' * bits). */')
        w('#ifndef %s_H' % U)
        w('#define %s_H' % U)
        w('#include "kern.h"')
        w('#define %s_ROWS %d' % (U, R))
        w('#define %s_HIDDEN %d' % (U, H))
        w('kern_status %s_run(kern_ctx *ctx, const uint16_t *x, const uint16_t *residual, const %s *weight,' % (name, WT))
        w('                   const %s *bias, uint16_t *y, uint16_t *residual_out);' % WT)
        emit_impl_open(w, U)
    w('')
    w('static float %s__bf(uint16_t h) {' % name)
    w('    uint32_t u = (uint32_t)h << 16;')
    w('    float f;')
    w('    memcpy(&f, &u, 4);')
    w('    return f;')
    w('}')
    wl = '%s__bf(%%s)' % name if wdt == 'bf16' else '%s'
    hs = ['    {',
          '        float s4[4], s2[2];',
          '        for (l = 0; l < 4; l++) s4[l] = acc[l] + acc[l + 4];',
          '        for (l = 0; l < 2; l++) s2[l] = s4[l] + s4[l + 2];',
          '        s = s2[0] + s2[1];',
          '    }']
    # scalar twin
    w('')
    w('static void %s__row_scalar(const uint16_t *x, const uint16_t *res, const %s *wt, const %s *bs,' % (name, WT, WT))
    w('                         uint16_t *y, uint16_t *so) {')
    w('    float s, mean = 0.0f, rstd, acc[8];')
    w('    int64_t j;')
    w('    int l;')
    w('    memset(acc, 0, sizeof acc);')
    w('    for (j = 0; j < %d; j += 8)' % H)
    w('        for (l = 0; l < 8; l++) {')
    w('            float v = %s__bf(x[j + l]);' % name)
    w('            if (res) v = v + %s__bf(res[j + l]);' % name)
    w('            acc[l] = %s;' % ('acc[l] + v' if layer else 'fmaf(v, v, acc[l])'))
    w('        }')
    for l in hs:
        w(l)
    if layer:
        w('    mean = s / %d.0f;' % H)
        w('    memset(acc, 0, sizeof acc);')
        w('    for (j = 0; j < %d; j += 8)' % H)
        w('        for (l = 0; l < 8; l++) {')
        w('            float v = %s__bf(x[j + l]);' % name)
        w('            if (res) v = v + %s__bf(res[j + l]);' % name)
        w('            v = v - mean;')
        w('            acc[l] = fmaf(v, v, acc[l]);')
        w('        }')
        for l in hs:
            w(l)
    w('    rstd = 1.0f / sqrtf(s / %d.0f + %s);' % (H, c_float(eps)))
    w('    for (j = 0; j < %d; j++) {' % H)
    w('        float v = %s__bf(x[j]);' % name)
    w('        if (res) v = v + %s__bf(res[j]);' % name)
    w('        if (so) so[j] = kern_f32_to_bf16(v);')
    w('        v = (v - mean) * rstd;')
    w('        if (wt && bs) v = fmaf(v, %s, %s);' % (wl % 'wt[j]', wl % 'bs[j]'))
    w('        else if (wt) v = v * %s;' % (wl % 'wt[j]'))
    w('        else if (bs) v = v + %s;' % (wl % 'bs[j]'))
    w('        y[j] = kern_f32_to_bf16(v);')
    w('    }')
    if not layer:
        w('    (void)mean;')
    w('}')
    # AVX2
    w('')
    w('#ifdef KERN_X86')
    w('KERN_TARGET_AVX2')
    w('static __m256 %s__ld8(const uint16_t *p) {' % name)
    w('    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)), 16));')
    w('}')
    w('')
    w('/* kern_f32_to_bf16 on 8 lanes, stored */')
    w('KERN_TARGET_AVX2')
    w('static void %s__st8(uint16_t *p, __m256 v) {' % name)
    w('    const __m256i u = _mm256_castps_si256(v);')
    w('    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),')
    w('                                           _mm256_set1_epi32(0x7f800000));')
    w('    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff),')
    w('                                                     _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1))));')
    w('    r = _mm256_blendv_epi8(r, _mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), nan);')
    w('    r = _mm256_srli_epi32(r, 16);')
    w('    r = _mm256_packus_epi32(r, r);')
    w('    _mm_storeu_si128((__m128i *)(void *)p, _mm256_castsi256_si128(_mm256_permute4x64_epi64(r, 0x08)));')
    w('}')

    def hsum():
        return ['    {',
                '        __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));',
                '        __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));',
                '        s = _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));',
                '    }']
    wv = ('%s__ld8(%%s)' % name) if wdt == 'bf16' else '_mm256_loadu_ps(%s)'
    w('')
    w('KERN_TARGET_AVX2')
    w('static void %s__row_avx2(const uint16_t *x, const uint16_t *res, const %s *wt, const %s *bs,' % (name, WT, WT))
    w('                         uint16_t *y, uint16_t *so) {')
    w('    float s, mean = 0.0f, rstd;')
    w('    int64_t j;')
    w('    __m256 acc = _mm256_setzero_ps();')
    w('    for (j = 0; j < %d; j += 8) {' % H)
    w('        __m256 v = %s__ld8(x + j);' % name)
    w('        if (res) v = _mm256_add_ps(v, %s__ld8(res + j));' % name)
    w('        acc = %s;' % ('_mm256_add_ps(acc, v)' if layer else '_mm256_fmadd_ps(v, v, acc)'))
    w('    }')
    for l in hsum():
        w(l)
    if layer:
        w('    mean = s / %d.0f;' % H)
        w('    acc = _mm256_setzero_ps();')
        w('    for (j = 0; j < %d; j += 8) {' % H)
        w('        __m256 v = %s__ld8(x + j);' % name)
        w('        if (res) v = _mm256_add_ps(v, %s__ld8(res + j));' % name)
        w('        v = _mm256_sub_ps(v, _mm256_set1_ps(mean));')
        w('        acc = _mm256_fmadd_ps(v, v, acc);')
        w('    }')
        for l in hsum():
            w(l)
    w('    rstd = 1.0f / sqrtf(s / %d.0f + %s);' % (H, c_float(eps)))
    w('    for (j = 0; j < %d; j += 8) {' % H)
    w('        __m256 v = %s__ld8(x + j);' % name)
    w('        if (res) v = _mm256_add_ps(v, %s__ld8(res + j));' % name)
    w('        if (so) %s__st8(so + j, v);' % name)
    w('        v = _mm256_mul_ps(_mm256_sub_ps(v, _mm256_set1_ps(mean)), _mm256_set1_ps(rstd));')
    w('        if (wt && bs) v = _mm256_fmadd_ps(v, %s, %s);' % (wv % '(wt + j)', wv % '(bs + j)'))
    w('        else if (wt) v = _mm256_mul_ps(v, %s);' % (wv % '(wt + j)'))
    w('        else if (bs) v = _mm256_add_ps(v, %s);' % (wv % '(bs + j)'))
    w('        %s__st8(y + j, v);' % name)
    w('    }')
    if not layer:
        w('    (void)mean;')
    w('}')
    w('#endif')
    emit_norm_run(w, name, U, sto, R, H, 'uint16_t', WT, impl_only)
    return '\n'.join(o) + '\n'


def cmd_norm(args, argv):
    if args.dtype not in ('f32', 'bf16'):
        raise GenError("norm: --dtype must be 'f32' or 'bf16', not %r" % args.dtype)
    wdt = args.weight_dtype or args.dtype
    if wdt not in ('f32', 'bf16') or (args.dtype == 'f32' and wdt != 'f32'):
        raise GenError("norm: --weight-dtype must be 'f32'%s, not %r" % (
            " or 'bf16'" if args.dtype == 'bf16' else ' with --dtype f32', wdt))
    if args.kind not in ('layer', 'rms'):
        raise GenError("norm: --kind must be 'layer' or 'rms', not %r" % args.kind)
    if args.rows < 1 or args.rows > 1 << 20:
        raise GenError('norm: --rows %d is outside [1, 1048576]' % args.rows)
    if args.h < 8 or args.h > 1 << 20 or args.h % 8:
        raise GenError('norm: --h %d must be a multiple of 8 in [8, 1048576]' % args.h)
    name = args.name or c_ident(os.path.splitext(os.path.basename(args.out))[0])
    if not re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', name):
        raise GenError('--name %r is not a C identifier' % name)
    eps = f32(args.eps if args.eps is not None else 1e-5)
    banner = ['command: kern_gen.py ' + ' '.join(argv),
              'instance: %s_norm %s%s rows=%d H=%d eps=%s' % (
                  args.kind, args.dtype, ' (weight %s)' % wdt if args.dtype != 'f32' else '',
                  args.rows, args.h, c_float(eps))]
    if args.dtype == 'bf16':
        write_atomic(args.out, emit_norm_bf16(name, args.rows, args.h, args.kind, eps, wdt, banner))
    else:
        write_atomic(args.out, emit_norm(name, args.rows, args.h, args.kind, eps, banner))


# ---------------------------------------------------------- sdpa instances
def emit_sdpa(name, HQ, HKV, LQ, LK, D, causal, scale, banner, dt='f32'):
    """Attention for one sequence with every size constant: q [HQ,LQ,D],
    k and v [HKV,LK,D], y [HQ,LQ,D], contiguous f32. The HQ/HKV query heads
    of a group (GQA) walk their K/V rows together (each row read once per
    group), with an online softmax (running max, rescaled sum and
    accumulator); causal aligns the queries to the last keys. D a multiple
    of 8: dot products in 8 lanes summed in one fixed order, expf for the
    weights, so the AVX2 code and its scalar twin (fmaf) give the same
    bits. The K/V heads split over the context's threads (same bits).
    dt 'bf16': q, k, v and y bf16, the same f32 arithmetic: the group's q
    rows widened once, each K/V row once per group, y rounded to nearest
    even once (kern_f32_to_bf16's rule)."""
    U = name.upper()
    G = HQ // HKV
    RW = G * LQ
    bf = dt == 'bf16'
    T = 'uint16_t' if bf else 'float'
    qn, kn, vn = ('qf', 'kf', 'vf') if bf else ('qg', 'kj', 'vj')
    o = []
    w = o.append
    emit_banner(w, name, banner)
    w(' * y[%d,%d,%d] = softmax(q k^T * %s%s) v; q [%d,%d,%d], k and v [%d,%d,%d],' % (
        HQ, LQ, D, repr(scale), ', causal (queries at the last keys)' if causal else '',
        HQ, LQ, D, HKV, LK, D))
    w(' * contiguous %s; query head h reads K/V head h / %d. The ISA is the' % (
        'bf16 (f32 arithmetic, y rounded to nearest even once)' if bf else 'f32', G))
    w(' * context\'s (AVX2 or the scalar twin: the same bits), the K/V heads split')
    w(' * over its threads. */')
    w('#ifndef %s_H' % U)
    w('#define %s_H' % U)
    w('#include "kern.h"')
    w('kern_status %s_run(kern_ctx *ctx, const %s *q, const %s *k, const %s *v, %s *y);' % (name, T, T, T, T))
    emit_impl_open(w, U)
    if bf:  # n (a multiple of 8) bf16 as f32, exactly
        w('')
        w('static void %s__widen_scalar(const uint16_t *s, float *d, int64_t n) {' % name)
        w('    int64_t i;')
        w('    for (i = 0; i < n; i++) {')
        w('        uint32_t u = (uint32_t)s[i] << 16;')
        w('        memcpy(d + i, &u, 4);')
        w('    }')
        w('}')
        w('')
        w('#ifdef KERN_X86')
        w('KERN_TARGET_AVX2')
        w('static void %s__widen_avx2(const uint16_t *s, float *d, int64_t n) {' % name)
        w('    int64_t i;')
        w('    for (i = 0; i < n; i += 8)')
        w('        _mm256_storeu_si256((__m256i *)(void *)(d + i), _mm256_slli_epi32(_mm256_cvtepu16_epi32(')
        w('                                _mm_loadu_si128((const __m128i *)(const void *)(s + i))), 16));')
        w('}')
        w('#endif')
    for isa in ('scalar', 'avx2'):
        isa_begin(w, isa)
        w('static void %s__head_%s(const %s *q, const %s *k, const %s *v, %s *y, int64_t g) {' % (
            name, isa, T, T, T, T))
        w('    /* the %d rows (query head, query) of K/V head g */' % RW)
        w('    float mx[%d], sum[%d], acc[%d];' % (RW, RW, RW * D))
        if bf:
            w('    float qf[%d], kf[%d], vf[%d];' % (RW * D, D, D))
        w('    int64_t j, r, d;')
        w('    const %s *kg = k + g * %d, *vg = v + g * %d;' % (T, LK * D, LK * D))
        w('    const %s *qg = q + g * %d;' % (T, G * LQ * D))
        if bf:
            w('    %s__widen_%s(qg, qf, %d);' % (name, isa, RW * D))
        w('    for (r = 0; r < %d; r++) {' % RW)
        w('        mx[r] = -INFINITY;')
        w('        sum[r] = 0.0f;')
        w('    }')
        w('    memset(acc, 0, sizeof acc);')
        w('    for (j = 0; j < %d; j++) {' % LK)
        if bf:
            w('        %s__widen_%s(kg + j * %d, kf, %d);' % (name, isa, D, D))
            w('        %s__widen_%s(vg + j * %d, vf, %d);' % (name, isa, D, D))
        else:
            w('        const float *kj = kg + j * %d, *vj = vg + j * %d;' % (D, D))
        w('        for (r = 0; r < %d; r++) {' % RW)
        w('            const float *qr = %s + r * %d;' % (qn, D))
        w('            float s, mn, corr, p;')
        if causal:
            w('            if (j > %d + r %% %d) continue;' % (LK - LQ, LQ))
        if isa == 'avx2':
            w('            {')
            w('                __m256 a = _mm256_setzero_ps();')
            w('                for (d = 0; d < %d; d += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(qr + d), _mm256_loadu_ps(%s + d), a);' % (D, kn))
            w('                {')
            w('                    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));')
            w('                    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));')
            w('                    s = _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));')
            w('                }')
            w('            }')
        else:
            w('            {')
            w('                float a[8], s4[4], s2[2];')
            w('                int l;')
            w('                memset(a, 0, sizeof a);')
            w('                for (d = 0; d < %d; d += 8)' % D)
            w('                    for (l = 0; l < 8; l++) a[l] = fmaf(qr[d + l], %s[d + l], a[l]);' % kn)
            w('                for (l = 0; l < 4; l++) s4[l] = a[l] + a[l + 4];')
            w('                for (l = 0; l < 2; l++) s2[l] = s4[l] + s4[l + 2];')
            w('                s = s2[0] + s2[1];')
            w('            }')
        w('            s = s * %s;' % c_float(scale))
        w('            mn = s > mx[r] ? s : mx[r];')
        w('            corr = expf(mx[r] - mn);')
        w('            p = expf(s - mn);')
        w('            mx[r] = mn;')
        w('            sum[r] = fmaf(sum[r], corr, p);')
        if isa == 'avx2':
            w('            {')
            w('                const __m256 vc = _mm256_set1_ps(corr), vp = _mm256_set1_ps(p);')
            w('                float *ar = acc + r * %d;' % D)
            w('                for (d = 0; d < %d; d += 8)' % D)
            w('                    _mm256_storeu_ps(ar + d, _mm256_fmadd_ps(vp, _mm256_loadu_ps(%s + d), _mm256_mul_ps(_mm256_loadu_ps(ar + d), vc)));' % vn)
            w('            }')
        else:
            w('            for (d = 0; d < %d; d++) acc[r * %d + d] = fmaf(p, %s[d], acc[r * %d + d] * corr);' % (D, D, vn, D))
        w('        }')
        w('    }')
        w('    for (r = 0; r < %d; r++) {' % RW)
        w('        const float inv = sum[r] > 0.0f ? 1.0f / sum[r] : 0.0f;')
        w('        %s *yr = y + (g * %d + r) * %d;' % (T, RW, D))
        if bf:  # the same product, rounded: the scalar rule on every ISA
            w('        for (d = 0; d < %d; d++) yr[d] = kern_f32_to_bf16(acc[r * %d + d] * inv);' % (D, D))
        else:
            w('        for (d = 0; d < %d; d++) yr[d] = acc[r * %d + d] * inv;' % (D, D))
        w('    }')
        w('}')
        isa_end(w, isa)
    w('')
    w('typedef struct %s__args {' % name)
    w('    kern_ctx *ctx;')
    w('    const %s *q, *k, *v;' % T)
    w('    %s *y;' % T)
    w('} %s__args;' % name)
    w('')
    w('static void %s__task(void *arg, int64_t g, int thread) {' % name)
    w('    const %s__args *a = (const %s__args *)arg;' % (name, name))
    w('    (void)thread;')
    w('#ifdef KERN_X86')
    w('    if (kern_ctx_isa(a->ctx) >= KERN_ISA_AVX2 && kern_ctx_isa(a->ctx) < KERN_ISA_NEON) {')
    w('        %s__head_avx2(a->q, a->k, a->v, a->y, g);' % name)
    w('        return;')
    w('    }')
    w('#endif')
    w('    %s__head_scalar(a->q, a->k, a->v, a->y, g);' % name)
    w('}')
    w('')
    w('kern_status %s_run(kern_ctx *ctx, const %s *q, const %s *k, const %s *v, %s *y) {' % (name, T, T, T, T))
    w('    %s__args a;' % name)
    w('    if (!q || !k || !v || !y) return kern__err(KERN_ERR_ARG, "%s_run: q, k, v or y is NULL");' % name)
    w('    a.ctx = ctx;')
    w('    a.q = q;')
    w('    a.k = k;')
    w('    a.v = v;')
    w('    a.y = y;')
    w('    if (kern_ctx_threads(ctx) <= 1 || %d == 1) {' % HKV)
    w('        int64_t g;')
    w('        for (g = 0; g < %d; g++) %s__task(&a, g, 0);' % (HKV, name))
    w('        return KERN_OK;')
    w('    }')
    w('    return kern_parallel_for(ctx, %d, %s__task, &a);' % (HKV, name))
    w('}')
    emit_impl_close(w, U)
    return '\n'.join(o) + '\n'


# ------------------------------------------------ decode-attention instances
# A decoder's decode_attention node (kern_decode_attention: Lq <= 8 new
# queries per sequence against [B, Lmax, Hkv, D] caches and k_lens) with
# every size, stride, dtype and the head grouping constant. Split-KV as
# the library does it: a task per (sequence, DA_SPLIT cache rows) keeps,
# per query row, its running max m (log2 units), sum l and acc in the
# arena's part buffer; a second pass merges the splits with the
# log-sum-exp rule. Within a task, DA_CHUNK rows at a time, per KV head:
# the group's G * Lq query rows' scores (four rows a K row), the online
# softmax update, then p.v with the accumulators in registers over the
# chunk. Its own summation order (dot products in 16 lanes reduced
# 16 -> 8 -> 4 -> 2 -> 1, sums of 2^x in 8 lanes, a degree-6 polynomial
# for 2^x), the same in the AVX2 body and the scalar twin, so both give
# the same bits; against kern_decode_attention, within f32 rounding.
DA_SPLIT = 128  # cache rows per task
DA_SPLITS = (64, 128, 256, 512)  # what --autotune times
DA_CHUNK = 64   # cache rows per softmax step (a multiple of 8)
DA_PF = 8       # K rows ahead that the bodies hint (a decoder's caches come
                # from memory: without hints the AVX-512 body ran 1.4-1.9x
                # slower, with them 16 or 32 rows ahead 2-5 % slower than 8;
                # the AVX2 body's f32 case 1.6x slower without)
# 2^f on [-1/2, 1/2], relative error below 8e-8 (least squares in f32)
DA_EXP2 = (1.0, 0.6931471824645996, 0.24022646248340607, 0.05550329014658928,
           0.009618519805371761, 0.0013399859890341759, 0.00015337577497120947)


def da_exp2_poly(w, fma, const):
    """p = 2^f by Horner's rule over DA_EXP2, one FMA a step (fma and
    const: the ISA's forms as format strings)."""
    w('    p = %s;' % (const % c_float(DA_EXP2[6])))
    for c in reversed(DA_EXP2[:6]):
        w('    p = %s;' % (fma % (const % c_float(c))))


def da_pv_block(w, rb, nreg, V, o0, vrow, CH, DV2):
    """One p.v register block of a decode-attention instance: rb query
    rows x nreg vectors at o0 (rows DV2 floats apart) += the chunk's n
    weights (rows of Sh, CH apart) times the V rows at vrow. V: the ISA's
    (type, load, broadcast, fma, store formats, lanes, V-row load)."""
    T, ld, bc, fma, st, VL, vload = V
    hs = range(nreg)
    w('                    float *o0 = %s;' % o0)
    w('                    %s %s;' % (T, ', '.join('c%d%d = %s' % (i, h, ld % ('o0 + %d' % (i * DV2 + VL * h)))
                                            for i in range(rb) for h in hs)))
    w('                    for (j = 0; j < n; j++) {')
    w('                        const %s %s;' % (T, ', '.join('v%d = %s' % (h, vload('%s + %d' % (vrow, VL * h)))
                                                  for h in hs)))
    for i in range(rb):
        w('                        {')
        w('                            const %s p = %s;' % (T, bc % ('Sh + (r0 + %d) * %d + j' % (i, CH))))
        for h in hs:
            w('                            c%d%d = %s;' % (i, h, fma % ('p', 'v%d' % h, 'c%d%d' % (i, h))))
        w('                        }')
    w('                    }')
    for i in range(rb):
        for h in hs:
            w('                    %s;' % (st % ('o0 + %d' % (i * DV2 + VL * h), 'c%d%d' % (i, h))))


def da_fits(B, LQ, H, HKV, D, DV):
    """Whether a decode_attention shape takes an instance: D and Dv
    multiples of 8, at most 8 new rows, the q rows (R x D floats), the
    scores (R x DA_CHUNK) and the merge's row within the task's stack."""
    return (D % 8 == 0 and DV % 8 == 0 and 1 <= LQ <= 8 and D >= 8 and DV >= 8 and
            H * LQ * D <= 16384 and H * LQ <= 256 and DV <= 4096 and H % HKV == 0)


def emit_decode_attn(name, key, split=DA_SPLIT):
    """The instance for key = (B, LQ, H, HKV, D, DV, LMAX, qdt, kdt, vdt,
    ldt, strides, scale2, has_ks, has_vs); strides: q, k, v, y, k_lens,
    k_scale, v_scale element strides (the last dim's is 1); split: cache
    rows per task (a multiple of DA_CHUNK)."""
    SP = split
    (B, LQ, H, HKV, D, DV, LMAX, qdt, kdt, vdt, ldt, strides, scale2, hks, hvs) = key
    qst, kst, vst, yst, lst, ksst, vsst = strides
    G = H // HKV
    R, RW = H * LQ, G * LQ
    NS = max(1, (LMAX + SP - 1) // SP)
    CH = DA_CHUNK
    N = name
    o = []
    w = o.append

    def sld(dt, e):  # one element as f32 (the scalar twin)
        return {'f32': e, 'bf16': '%s__bf(%s)' % (N, e), 'f16': 'kern_f16_to_f32(%s)' % e,
                'i8': '(float)%s' % e}[dt]

    def vld(dt, p):  # eight elements at p as f32 (AVX2)
        return {'f32': '_mm256_loadu_ps(%s)' % p,
                'bf16': '_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32('
                        '_mm_loadu_si128((const __m128i *)(const void *)(%s))), 16))' % p,
                'f16': '_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(%s)))' % p,
                'i8': '_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64('
                      '(const __m128i *)(const void *)(%s))))' % p}[dt]

    def zld(dt, p):  # sixteen elements at p as f32 (AVX-512)
        return {'f32': '_mm512_loadu_ps(%s)' % p,
                'bf16': '_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32('
                        '_mm256_loadu_si256((const __m256i *)(const void *)(%s))), 16))' % p,
                'f16': '_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(%s)))' % p,
                'i8': '_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128('
                      '(const __m128i *)(const void *)(%s))))' % p}[dt]

    def sst(dt, e, v):  # store f32 v as the output's dtype
        return {'f32': '%s = %s;' % (e, v), 'bf16': '%s = kern_f32_to_bf16(%s);' % (e, v),
                'f16': '%s = kern_f32_to_f16(%s);' % (e, v)}[dt]

    w('')
    w('/* decode-attention instance: B=%d Lq=%d H=%d Hkv=%d (groups of %d) D=%d Dv=%d' % (
        B, LQ, H, HKV, G, D, DV))
    w(' * Lmax=%d, q %s, caches %s / %s%s, %d splits of %d rows */' % (
        LMAX, qdt, kdt, vdt, ', i8 row scales' if hks or hvs else '', NS, SP))
    w('typedef struct %s__args {' % N)
    w('    const %s *q;' % CTYPE[qdt])
    w('    const %s *k;' % CTYPE[kdt])
    w('    const %s *v;' % CTYPE[vdt])
    w('    const float *ks, *vs;')
    w('    %s *y;' % CTYPE[qdt])
    w('    float *part;')
    w('    int64_t len[%d];' % B)
    w('    int64_t nsrun;')
    w('    int isa;')
    w('} %s__args;' % N)
    w('#if defined(__GNUC__) && defined(KERN_X86)')
    w('#define %s__KEEP(v) __asm__("" : "+x"(v)) /* no contraction across it */' % N)
    w('#elif defined(__GNUC__) && defined(__aarch64__)')
    w('#define %s__KEEP(v) __asm__("" : "+w"(v))' % N)
    w('#else')
    w('#define %s__KEEP(v) (void)0' % N)
    w('#endif')
    if 'bf16' in (qdt, kdt, vdt):
        w('static float %s__bf(uint16_t h) {' % N)
        w('    uint32_t u = (uint32_t)h << 16;')
        w('    float f;')
        w('    memcpy(&f, &u, 4);')
        w('    return f;')
        w('}')
    # 2^x for x <= 0: rne(x) = n, 2^(x - n) by the polynomial, times 2^n;
    # 0 below 2^-100 (and for NaN): such a weight is below 2^-76 of the
    # sum (which is at least 1), and tinier ones, times an i8 row scale,
    # made subnormal operands in p.v, a microcode assist per FMA on Intel
    w('static float %s__exp2(float x) {' % N)
    w('    float n, f, p, r, s;')
    w('    int32_t e;')
    w('    if (!(x >= -100.0f)) return 0.0f;')
    w('    n = rintf(x);')
    w('    f = x - n;')
    da_exp2_poly(w, 'fmaf(p, f, %s)', '%s')
    w('    e = ((int32_t)n + 127) << 23;')
    w('    memcpy(&s, &e, 4);')
    w('    r = p * s;')
    w('    %s__KEEP(r);' % N)
    w('    return r;')
    w('}')
    w('#ifdef KERN_X86')
    w('KERN_TARGET_AVX2 static __m256 %s__exp2_avx2(__m256 x) {' % N)
    w('    const __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(-100.0f), _CMP_GE_OQ);')
    w('    __m256 n, f, p, r;')
    w('    x = _mm256_max_ps(x, _mm256_set1_ps(-100.0f));')
    w('    n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);')
    w('    f = _mm256_sub_ps(x, n);')
    da_exp2_poly(w, '_mm256_fmadd_ps(p, f, %s)', '_mm256_set1_ps(%s)')
    w('    r = _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(')
    w('        _mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23)));')
    w('    r = _mm256_and_ps(r, keep);')
    w('    %s__KEEP(r);' % N)
    w('    return r;')
    w('}')
    w('KERN_TARGET_AVX2 static float %s__hsum16_avx2(__m256 a0, __m256 a1) {' % N)
    w('    __m256 t8 = _mm256_add_ps(a0, a1);')
    w('    __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));')
    w('    __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));')
    w('    return _mm_cvtss_f32(_mm_add_ss(t2, _mm_shuffle_ps(t2, t2, 1)));')
    w('}')
    w('#endif')
    # ---- one split, per ISA
    for isa in ('scalar', 'avx2', 'avx512'):
        av, z = isa != 'scalar', isa == 'avx512'
        if av:
            w('#ifdef KERN_X86')
            w('KERN_TARGET_AVX512' if z else 'KERN_TARGET_AVX2')
        w('static void %s__split_%s(const %s__args *a, int64_t b, int64_t s) {' % (N, isa, N))
        w('    float qf[%d]; /* the query rows, times scale * log2(e) */' % (R * D))
        w('    float S[%d]; /* the rows\' scores, then weights */' % (R * CH))
        w('    float sc[%d];' % CH)
        w('    const int64_t len = a->len[b];')
        w('    int64_t j1 = (s + 1) * %d, c0, j, r, hk, d;' % SP)
        w('    float *part = a->part + (b * %d + s) * %d;' % (NS, R * (DV + 2)))
        w('    if (j1 > len) j1 = len;')
        w('    memset(S, 0, sizeof S);')
        w('    for (r = 0; r < %d; r++) {' % R)
        w('        float *o = part + r * %d;' % (DV + 2))
        w('        const %s *qp = a->q + b * %d + (r %% %d) * %d + (r / %d) * %d;' % (
            CTYPE[qdt], qst[0], LQ, qst[1], LQ, qst[2]))
        w('        o[0] = -INFINITY;')
        w('        o[1] = 0.0f;')
        w('        memset(o + 2, 0, %d * sizeof(float));' % DV)
        w('        for (d = 0; d < %d; d++) qf[r * %d + d] = %s * %s;' % (
            D, D, sld(qdt, 'qp[d]'), c_float(scale2)))
        w('    }')
        w('    for (c0 = s * %d; c0 < j1; c0 += %d) {' % (SP, CH))
        w('        const int64_t n = j1 - c0 < %d ? j1 - c0 : %d, n8 = (n + 7) / 8 * 8;' % (CH, CH))
        w('        const %s *kb0 = a->k + b * %d + c0 * %d;' % (CTYPE[kdt], kst[0], kst[1]))
        w('        const %s *vb0 = a->v + b * %d + c0 * %d;' % (CTYPE[vdt], vst[0], vst[1]))
        # scores: cache row by cache row, every KV head of the row (in
        # address order: [Lmax, Hkv, D] keeps a row's heads together)
        if z:  # one 16-lane accumulator a row (lanes d % 16, as the AVX2
            # pair); 4 cache rows x 4 q rows a block (each load feeds 4 FMAs),
            # then the rows left one at a time
            w('        for (j = 0; j < n; ) {')
            w('            const int64_t nk = n - j >= 4 ? 4 : 1;')
            w('            for (hk = 0; hk < %d; hk++) {' % HKV)
            w('                const %s *kr = kb0 + j * %d + hk * %d;' % (CTYPE[kdt], kst[1], kst[2]))
            w('                const float *qh = qf + hk * %d;' % (RW * D))
            w('                float *Sh = S + hk * %d;' % (RW * CH))
            w('                int64_t r0;')
            # hints, spread over the head blocks: this head's K rows DA_PF
            # ahead (inside the cache) and its V rows of this step, read
            # by the p.v below, so the misses overlap the dot products
            # (a decoder's caches come from memory)
            w('                if (nk == 4) {')
            w('                    const char *pk = (const char *)(const void *)(kr + %d);' % (DA_PF * kst[1]))
            w('                    const char *pv = (const char *)(const void *)(vb0 + j * %d + hk * %d);' % (vst[1], vst[2]))
            w('                    int pr, px;')
            w('                    if (c0 + j + %d < %d)' % (DA_PF + 3, LMAX))
            w('                        for (pr = 0; pr < 4; pr++)')
            w('                            for (px = 0; px < %d; px += 64) _mm_prefetch(pk + pr * %d + px, _MM_HINT_T0);' % (
                D * DTYPES[kdt][1], kst[1] * DTYPES[kdt][1]))
            w('                    for (pr = 0; pr < 4; pr++)')
            w('                        for (px = 0; px < %d; px += 64) _mm_prefetch(pv + pr * %d + px, _MM_HINT_T0);' % (
                DV * DTYPES[vdt][1], vst[1] * DTYPES[vdt][1]))
            w('                }')
            for four in (1, 0):
                kk = range(4) if four else (0,)
                w('                %s {' % ('if (nk == 4)' if four else 'else'))
                for rb in (4, 1):
                    w('                    for (r0 = 0; r0 + 4 <= %d; r0 += 4) {' % RW if rb == 4 else
                      '                    for (; r0 < %d; r0++) {' % RW)
                    w('                        const float *q0 = qh + r0 * %d;' % D)
                    w('                        __m512 %s;' % ', '.join('a%d%d = _mm512_setzero_ps()' % (i, k) for i in range(rb) for k in kk))
                    w('                        for (d = 0; d + 16 <= %d; d += 16) {' % D)
                    w('                            const __m512 %s;' % ', '.join('k%d = %s' % (k, zld(kdt, 'kr + %d + d' % (k * kst[1]))) for k in kk))
                    for i in range(rb):
                        w('                            {')
                        w('                                const __m512 q = _mm512_loadu_ps(q0 + %d + d);' % (i * D))
                        for k in kk:
                            w('                                a%d%d = _mm512_fmadd_ps(q, k%d, a%d%d);' % (i, k, k, i, k))
                        w('                            }')
                    w('                        }')
                    if D % 16:  # the last 8 into lanes 0..7
                        w('                        {')
                        w('                            const __m256 %s;' % ', '.join('k%d = %s' % (k, vld(kdt, 'kr + %d' % (k * kst[1] + D - 8))) for k in kk))
                        for i in range(rb):
                            for k in kk:
                                w('                            a%d%d = _mm512_insertf32x8(a%d%d, _mm256_fmadd_ps(_mm256_loadu_ps(q0 + %d), k%d, _mm512_castps512_ps256(a%d%d)), 0);' % (
                                    i, k, i, k, i * D + D - 8, k, i, k))
                        w('                        }')
                    for i in range(rb):
                        for k in kk:
                            w('                        Sh[(r0 + %d) * %d + j + %d] = %s__hsum16_avx2(_mm512_castps512_ps256(a%d%d), _mm512_extractf32x8_ps(a%d%d, 1));' % (
                                i, CH, k, N, i, k, i, k))
                    w('                    }')
                w('                }')
            w('            }')
            w('            j += nk;')
            w('        }')
        else:
            w('        for (j = 0; j < n; j++) {')
            if isa == 'avx2':
                # hints: the K row DA_PF rows ahead (into the next chunk at the
                # end; never past the cache) and this row's V, read by the p.v
                # below, so the misses overlap the dot products
                kb_, vb_ = D * DTYPES[kdt][1], DV * DTYPES[vdt][1]
                w('            if (c0 + j + %d < %d) {' % (DA_PF, LMAX))
                for hk in range(HKV):
                    w('                %s' % ' '.join('_mm_prefetch((const char *)(const void *)(kb0 + (j + %d) * %d + %d) + %d, _MM_HINT_T0);' % (
                        DA_PF, kst[1], hk * kst[2], x) for x in range(0, kb_, 64)))
                w('            }')
                for hk in range(HKV):
                    w('            %s' % ' '.join('_mm_prefetch((const char *)(const void *)(vb0 + j * %d + %d) + %d, _MM_HINT_T0);' % (
                        vst[1], hk * vst[2], x) for x in range(0, vb_, 64)))
            w('            for (hk = 0; hk < %d; hk++) {' % HKV)
            w('                const %s *kr = kb0 + j * %d + hk * %d;' % (CTYPE[kdt], kst[1], kst[2]))
            w('                const float *qh = qf + hk * %d;' % (RW * D))
            w('                float *Sh = S + hk * %d;' % (RW * CH))
            w('                int64_t r0;')
            if av:
                for rb in (4, 1):
                    w('                for (r0 = 0; r0 + 4 <= %d; r0 += 4) {' % RW if rb == 4 else
                      '                for (; r0 < %d; r0++) {' % RW)
                    w('                        const float *q0 = qh + r0 * %d;' % D)
                    acc = ['a%d%d' % (i, h) for i in range(rb) for h in (0, 1)]
                    w('                        __m256 %s;' % ', '.join(x + ' = _mm256_setzero_ps()' for x in acc))
                    w('                        for (d = 0; d + 16 <= %d; d += 16) {' % D)
                    w('                            const __m256 k0 = %s, k1 = %s;' % (vld(kdt, 'kr + d'), vld(kdt, 'kr + d + 8')))
                    for i in range(rb):
                        w('                            a%d0 = _mm256_fmadd_ps(_mm256_loadu_ps(q0 + %d + d), k0, a%d0);' % (i, i * D, i))
                        w('                            a%d1 = _mm256_fmadd_ps(_mm256_loadu_ps(q0 + %d + d + 8), k1, a%d1);' % (i, i * D, i))
                    w('                        }')
                    if D % 16:
                        w('                        {')
                        w('                            const __m256 k0 = %s;' % vld(kdt, 'kr + %d' % (D - 8)))
                        for i in range(rb):
                            w('                            a%d0 = _mm256_fmadd_ps(_mm256_loadu_ps(q0 + %d), k0, a%d0);' % (i, i * D + D - 8, i))
                        w('                        }')
                    for i in range(rb):
                        w('                        Sh[(r0 + %d) * %d + j] = %s__hsum16_avx2(a%d0, a%d1);' % (i, CH, N, i, i))
                    w('                    }')
            else:
                w('                    for (r0 = 0; r0 < %d; r0++) {' % RW)
                w('                        const float *q0 = qh + r0 * %d;' % D)
                w('                        float a16[16], t8[8], t4[4], t2[2];')
                w('                        int l;')
                w('                        memset(a16, 0, sizeof a16);')
                w('                        for (d = 0; d < %d; d++) a16[d & 15] = fmaf(q0[d], %s, a16[d & 15]);' % (D, sld(kdt, 'kr[d]')))
                w('                        for (l = 0; l < 8; l++) t8[l] = a16[l] + a16[l + 8];')
                w('                        for (l = 0; l < 4; l++) t4[l] = t8[l] + t8[l + 4];')
                w('                        for (l = 0; l < 2; l++) t2[l] = t4[l] + t4[l + 2];')
                w('                        Sh[r0 * %d + j] = t2[0] + t2[1];' % CH)
                w('                    }')
            w('            }')
            w('        }')
        if hks:  # an i8 K: the score times its row's scale
            w('        for (hk = 0; hk < %d; hk++) {' % HKV)
            w('            int64_t r0;')
            w('            for (j = 0; j < n; j++) sc[j] = a->ks[b * %d + (c0 + j) * %d + hk * %d];' % ksst)
            w('            for (r0 = hk * %d; r0 < (hk + 1) * %d; r0++)' % (RW, RW))
            w('                for (j = 0; j < n; j++) {')
            w('                    float x = S[r0 * %d + j] * sc[j];' % CH)
            w('                    %s__KEEP(x);' % N)
            w('                    S[r0 * %d + j] = x;' % CH)
            w('                }')
            w('        }')
        # the online softmax, per row (r %% LQ: the query's position)
        w('        for (r = 0; r < %d; r++) {' % R)
        w('            float *sr = S + r * %d, *o = part + r * %d;' % (CH, DV + 2))
        w('            int64_t nr = len - (%d - r %% %d) - c0, e;' % (LQ - 1, LQ))
        w('            if (nr > n) nr = n;')
        w('            if (nr > 0) {')
        w('                float m = -INFINITY, ls;')
        if av:  # the max in 8 lanes (exact in any order; a NaN is skipped as below)
            w('                {')
            w('                    __m256 m8 = _mm256_set1_ps(-INFINITY);')
            w('                    __m128 m4;')
            w('                    for (j = 0; j + 8 <= nr; j += 8) m8 = _mm256_max_ps(_mm256_loadu_ps(sr + j), m8);')
            w('                    m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));')
            w('                    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));')
            w('                    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));')
            w('                    m = _mm_cvtss_f32(m4);')
            w('                }')
            w('                for (; j < nr; j++) m = sr[j] > m ? sr[j] : m;')
        else:
            w('                for (j = 0; j < nr; j++) m = sr[j] > m ? sr[j] : m;')
        w('                if (m <= o[0]) {')
        w('                    m = o[0];')
        w('                } else if (o[0] != -INFINITY) {')
        w('                    float wr = %s__exp2(o[0] - m), l1;' % N)
        w('                    for (e = 0; e < %d; e++) o[2 + e] *= wr;' % DV)
        w('                    l1 = o[1] * wr;')
        w('                    %s__KEEP(l1);' % N)
        w('                    o[1] = l1;')
        w('                }')
        w('                o[0] = m;')
        if av:
            w('                {')
            w('                    const __m256 vm = _mm256_set1_ps(m), vn = _mm256_set1_ps((float)nr);')
            w('                    const __m256 iota = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);')
            w('                    __m256 s8 = _mm256_setzero_ps();')
            w('                    __m128 t4, t2;')
            w('                    for (j = 0; j < n8; j += 8) {')
            w('                        __m256 t = %s__exp2_avx2(_mm256_sub_ps(_mm256_loadu_ps(sr + j), vm));' % N)
            w('                        t = _mm256_and_ps(t, _mm256_cmp_ps(_mm256_add_ps(iota, _mm256_set1_ps((float)j)), vn, _CMP_LT_OQ));')
            w('                        _mm256_storeu_ps(sr + j, t);')
            w('                        s8 = _mm256_add_ps(s8, t);')
            w('                    }')
            w('                    t4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));')
            w('                    t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));')
            w('                    ls = _mm_cvtss_f32(_mm_add_ss(t2, _mm_shuffle_ps(t2, t2, 1)));')
            w('                }')
        else:
            w('                {')
            w('                    float s8[8] = {0, 0, 0, 0, 0, 0, 0, 0}, t4[4], t2[2];')
            w('                    int l;')
            w('                    for (j = 0; j < n8; j++) {')
            w('                        float t = j < nr ? %s__exp2(sr[j] - m) : 0.0f;' % N)
            w('                        sr[j] = t;')
            w('                        s8[j & 7] += t;')
            w('                    }')
            w('                    for (l = 0; l < 4; l++) t4[l] = s8[l] + s8[l + 4];')
            w('                    for (l = 0; l < 2; l++) t2[l] = t4[l] + t4[l + 2];')
            w('                    ls = t2[0] + t2[1];')
            w('                }')
        w('                o[1] += ls;')
        w('            } else {')
        w('                for (j = 0; j < n8; j++) sr[j] = 0.0f;')
        w('            }')
        w('        }')
        w('        for (hk = 0; hk < %d; hk++) {' % HKV)
        w('            const float *Sh = S + hk * %d;' % (RW * CH))
        w('            float *oh = part + hk * %d;' % (RW * (DV + 2)))
        w('            const %s *vb = vb0 + hk * %d;' % (CTYPE[vdt], vst[2]))
        w('            int64_t r0, e;')
        if hvs:  # an i8 V: each row's scale into its weight (the sums are taken)
            w('            for (j = 0; j < n; j++) sc[j] = a->vs[b * %d + (c0 + j) * %d + hk * %d];' % vsst)
            w('            for (r0 = 0; r0 < %d; r0++)' % RW)
            w('                for (j = 0; j < n; j++) S[(hk * %d + r0) * %d + j] *= sc[j];' % (RW, CH))
        # p.v
        Z = ('__m512', '_mm512_loadu_ps(%s)', '_mm512_set1_ps(*(%s))', '_mm512_fmadd_ps(%s, %s, %s)',
             '_mm512_storeu_ps(%s, %s)', 16, lambda p_: zld(vdt, p_))
        Y = ('__m256', '_mm256_loadu_ps(%s)', '_mm256_broadcast_ss(%s)', '_mm256_fmadd_ps(%s, %s, %s)',
             '_mm256_storeu_ps(%s, %s)', 8, lambda p_: vld(vdt, p_))
        vrow = 'vb + j * %d + e' % vst[1]
        if av:  # AVX-512: 64 lanes of Dv a row (four registers), then 32 and 16;
            # AVX2: 16 (two); the 8-lane tail in one AVX2 register
            for rb in (4, 1):
                w('            for (r0 = %s; r0 + %d <= %d; r0 += %d) {' % ('0' if rb == 4 else 'r0', rb, RW, rb)
                  if rb == 4 else '            for (; r0 < %d; r0++) {' % RW)
                w('                e = 0;')
                for nreg in ((4, 2, 1) if z else (2,)):
                    V = Z if z else Y
                    wd = nreg * V[5]
                    w('                for (; e + %d <= %d; e += %d) {' % (wd, DV, wd))
                    da_pv_block(w, rb, nreg, V, 'oh + r0 * %d + 2 + e' % (DV + 2), vrow, CH, DV + 2)
                    w('                }')
                if DV % 16:
                    w('                {')
                    da_pv_block(w, rb, 1, Y, 'oh + r0 * %d + 2 + e' % (DV + 2), vrow, CH, DV + 2)
                    w('                }')
                w('            }')
        else:
            w('            for (r0 = 0; r0 < %d; r0++) {' % RW)
            w('                float *o0 = oh + r0 * %d + 2;' % (DV + 2))
            w('                for (e = 0; e < %d; e++) {' % DV)
            w('                    float c = o0[e];')
            w('                    for (j = 0; j < n; j++) c = fmaf(Sh[r0 * %d + j], %s, c);' % (
                CH, sld(vdt, 'vb[j * %d + e]' % vst[1])))
            w('                    o0[e] = c;')
            w('                }')
            w('            }')
        w('        }')
        w('    }')
        w('    (void)sc;')
        w('}')
        # the merge of one (sequence, query row): the AVX2 one at AVX-512
        if z:
            w('#endif')
            continue
        if av:
            w('KERN_TARGET_AVX2')
        w('static void %s__merge_%s(const %s__args *a, int64_t b, int64_t r) {' % (N, isa, N))
        w('    const int64_t seen = a->len[b] - (%d - r %% %d);' % (LQ - 1, LQ))
        w('    const int64_t nsp = seen > 0 ? (seen + %d) / %d : 0;' % (SP - 1, SP))
        w('    const float *p0 = a->part + b * %d + r * %d;' % (NS * R * (DV + 2), DV + 2))
        w('    %s *yr = a->y + b * %d + (r %% %d) * %d + (r / %d) * %d;' % (
            CTYPE[qdt], yst[0], LQ, yst[1], LQ, yst[2]))
        w('    float acc[%d], M = -INFINITY, den = 0.0f, inv;' % DV)
        w('    int64_t s, e;')
        w('    memset(acc, 0, sizeof acc);')
        w('    for (s = 0; s < nsp; s++) M = p0[s * %d] > M ? p0[s * %d] : M;' % (R * (DV + 2), R * (DV + 2)))
        w('    for (s = 0; s < nsp; s++) {')
        w('        const float *p = p0 + s * %d;' % (R * (DV + 2)))
        w('        const float wt = %s__exp2(p[0] - M);' % N)
        w('        den = fmaf(wt, p[1], den);')
        if av:
            w('        for (e = 0; e < %d; e += 8)' % DV)
            w('            _mm256_storeu_ps(acc + e, _mm256_fmadd_ps(_mm256_set1_ps(wt), _mm256_loadu_ps(p + 2 + e), _mm256_loadu_ps(acc + e)));')
        else:
            w('        for (e = 0; e < %d; e++) acc[e] = fmaf(wt, p[2 + e], acc[e]);' % DV)
        w('    }')
        w('    inv = nsp > 0 ? 1.0f / den : 0.0f;')
        w('    for (e = 0; e < %d; e++) {' % DV)
        w('        const float x = acc[e] * inv;')
        w('        %s' % sst(qdt, 'yr[e]', 'x'))
        w('    }')
        w('}')
        if av:
            w('#endif')
    w('static void %s__task(void *arg, int64_t t, int thread) {' % N)
    w('    const %s__args *a = (const %s__args *)arg;' % (N, N))
    w('    const int64_t b = t / a->nsrun, s = t % a->nsrun;')
    w('    (void)thread;')
    w('    if (s * %d >= a->len[b]) return; /* the merge reads none of it */' % SP)
    w('#ifdef KERN_X86')
    w('    if (a->isa == 2) {')
    w('        %s__split_avx512(a, b, s);' % N)
    w('        return;')
    w('    }')
    w('    if (a->isa) {')
    w('        %s__split_avx2(a, b, s);' % N)
    w('        return;')
    w('    }')
    w('#endif')
    w('    %s__split_scalar(a, b, s);' % N)
    w('}')
    w('static void %s__merge_task(void *arg, int64_t t, int thread) {' % N)
    w('    const %s__args *a = (const %s__args *)arg;' % (N, N))
    w('    (void)thread;')
    w('#ifdef KERN_X86')
    w('    if (a->isa) {')
    w('        %s__merge_avx2(a, t / %d, t %% %d);' % (N, R, R))
    w('        return;')
    w('    }')
    w('#endif')
    w('    %s__merge_scalar(a, t / %d, t %% %d);' % (N, R, R))
    w('}')
    w('static kern_status %s_run(kern_ctx *ctx, const %s *q, const %s *k, const %s *v,' % (
        N, CTYPE[qdt], CTYPE[kdt], CTYPE[vdt]))
    w('                          const %s *lens, const float *ks, const float *vs, %s *y,' % (CTYPE[ldt], CTYPE[qdt]))
    w('                          float *part) {')
    w('    %s__args a;' % N)
    w('    int64_t b;')
    w('    kern_status st = KERN_OK;')
    w('    a.q = q;')
    w('    a.k = k;')
    w('    a.v = v;')
    w('    a.ks = ks;')
    w('    a.vs = vs;')
    w('    a.y = y;')
    w('    a.part = part;')
    w('    a.nsrun = 0;')
    w('    a.isa = 0;')
    w('#ifdef KERN_X86')
    w('    if (kern_ctx_isa(ctx) < KERN_ISA_NEON)')
    w('        a.isa = kern_ctx_isa(ctx) >= KERN_ISA_AVX512 ? 2 : kern_ctx_isa(ctx) >= KERN_ISA_AVX2;')
    w('#endif')
    w('    for (b = 0; b < %d; b++) {' % B)
    w('        const int64_t n = (int64_t)lens[b * %d];' % lst[0])
    w('        if (n < 0)')
    w('            return kern__err(KERN_ERR_INDEX, "kern_decode_attention: k_lens[%lld]=%lld is negative",')
    w('                             (long long)b, (long long)n);')
    w('        if (n > %d)' % LMAX)
    w('            return kern__err(KERN_ERR_SHAPE, "kern_decode_attention: k_lens[%%lld]=%%lld is past the '
      'cache\'s %d rows",' % LMAX)
    w('                             (long long)b, (long long)n);')
    w('        a.len[b] = n;')
    w('        if ((n + %d) / %d > a.nsrun) a.nsrun = (n + %d) / %d;' % (
        SP - 1, SP, SP - 1, SP))
    w('    }')
    w('    (void)ks;')
    w('    (void)vs;')
    w('    if (a.nsrun) {')
    w('        if (kern_ctx_threads(ctx) <= 1 || %d * a.nsrun == 1) {' % B)
    w('            int64_t t;')
    w('            for (t = 0; t < %d * a.nsrun; t++) %s__task(&a, t, 0);' % (B, N))
    w('        } else {')
    w('            st = kern_parallel_for(ctx, %d * a.nsrun, %s__task, &a);' % (B, N))
    w('        }')
    w('    }')
    w('    if (!st) {')
    w('        if (kern_ctx_threads(ctx) <= 1 || %d == 1) {' % (B * R))
    w('            int64_t t;')
    w('            for (t = 0; t < %d; t++) %s__merge_task(&a, t, 0);' % (B * R, N))
    w('        } else {')
    w('            st = kern_parallel_for(ctx, %d, %s__merge_task, &a);' % (B * R, N))
    w('        }')
    w('    }')
    w('    return st;')
    w('}')
    return '\n'.join(o) + '\n'


def da_standalone_key(B, LQ, H, HKV, D, DV, LMAX, qdt, cdt, ldt, layout, scale):
    """The instance key of `kern_gen.py decode_attention`: contiguous q, y
    and k_lens; caches [B, Lmax, Hkv, D] (layout 'bshd', kern's) or [B, Hkv,
    Lmax, D] ('bhsd'), the i8 row scales [B, Lmax, Hkv] or [B, Hkv, Lmax]
    likewise."""
    if layout == 'bshd':
        kst, vst = (LMAX * HKV * D, HKV * D, D, 1), (LMAX * HKV * DV, HKV * DV, DV, 1)
        sst = (LMAX * HKV, HKV, 1)
    else:
        kst, vst = (HKV * LMAX * D, D, LMAX * D, 1), (HKV * LMAX * DV, DV, LMAX * DV, 1)
        sst = (HKV * LMAX, 1, LMAX)
    i8 = cdt == 'i8'
    return (B, LQ, H, HKV, D, DV, LMAX, qdt, cdt, cdt, ldt,
            ((LQ * H * D, H * D, D, 1), kst, vst, (LQ * H * DV, H * DV, DV, 1), (1,),
             sst if i8 else (0, 0, 0), sst if i8 else (0, 0, 0)),
            f32(scale * 1.4426950408889634), i8, i8)


def emit_decode_attn_standalone(name, key, split, layout, scale, banner):
    """`kern_gen.py decode_attention`'s header: the instance (emit_decode_attn)
    behind NAME_run, which checks its pointers first."""
    (B, LQ, H, HKV, D, DV, LMAX, qdt, cdt, _, ldt, _, _, i8, _) = key
    U = name.upper()
    NS = max(1, (LMAX + split - 1) // split)
    cl = '[B, Lmax, Hkv, %s]' if layout == 'bshd' else '[B, Hkv, Lmax, %s]'
    o = []
    w = o.append
    emit_banner(w, name, banner)
    w(' * y[b, l, h] = softmax(q[b, l, h] . k^T * %.9g) v over cache rows 0 ..' % scale)
    w(' * k_lens[b] - Lq + l of sequence b (the new rows already appended:')
    w(' * kern_decode_attention\'s rule), kv head h / %d; 0 where no row is' % (H // HKV))
    w(' * visible. Contiguous: q [%d, %d, %d, %d] %s, y [%d, %d, %d, %d] %s, k_lens [%d] %s,' % (
        B, LQ, H, D, qdt, B, LQ, H, DV, qdt, B, ldt))
    w(' * k_cache %s and v_cache %s %s (Lmax %d, Hkv %d)%s.' % (
        cl % D, cl % DV, cdt, LMAX, HKV,
        '; k_scale and v_scale %s f32, the row scales of the codes' % (
            '[B, Lmax, Hkv]' if layout == 'bshd' else '[B, Hkv, Lmax]') if i8 else ''))
    w(' * scratch: %s_SCRATCH_FLOATS floats (64-byte aligned is best), the' % U)
    w(' * split-KV partial results (%d tasks of %d cache rows a sequence,' % (NS, split))
    w(' * merged by log-sum-exp). Threads: the context\'s pool; the same bits at')
    w(' * any thread count and ISA (AVX-512, AVX2, the scalar twin). */')
    w('#ifndef %s_H' % U)
    w('#define %s_H' % U)
    w('#include "kern.h"')
    for k, v in (('BATCH', B), ('LQ', LQ), ('HEADS', H), ('KV_HEADS', HKV), ('D', D), ('DV', DV),
                 ('LMAX', LMAX), ('SPLIT', split)):
        w('#define %s_%s %d' % (U, k, v))
    w('#define %s_SCRATCH_FLOATS %d' % (U, B * NS * H * LQ * (DV + 2)))
    w('kern_status %s_run(kern_ctx *ctx, const %s *q, const %s *k_cache, const %s *v_cache,' % (
        name, CTYPE[qdt], CTYPE[cdt], CTYPE[cdt]))
    w('                   const %s *k_lens, const float *k_scale, const float *v_scale, %s *y,' % (
        CTYPE[ldt], CTYPE[qdt]))
    w('                   float *scratch);')
    emit_impl_open(w, U)
    o.append(emit_decode_attn('%s__i' % name, key, split).rstrip('\n'))
    w('')
    w('kern_status %s_run(kern_ctx *ctx, const %s *q, const %s *k_cache, const %s *v_cache,' % (
        name, CTYPE[qdt], CTYPE[cdt], CTYPE[cdt]))
    w('                   const %s *k_lens, const float *k_scale, const float *v_scale, %s *y,' % (
        CTYPE[ldt], CTYPE[qdt]))
    w('                   float *scratch) {')
    w('    if (!ctx || !q || !k_cache || !v_cache || !k_lens || !y || !scratch)')
    w('        return kern__err(KERN_ERR_ARG, "%s_run: ctx, q, k_cache, v_cache, k_lens, y or scratch is NULL");' % name)
    if i8:
        w('    if (!k_scale || !v_scale)')
        w('        return kern__err(KERN_ERR_ARG, "%s_run: an i8 cache needs k_scale and v_scale");' % name)
    w('    return %s__i_run(ctx, q, k_cache, v_cache, k_lens, k_scale, v_scale, y, scratch);' % name)
    w('}')
    emit_impl_close(w, U)
    return '\n'.join(o) + '\n'


def cmd_decode_attention(args, argv):
    import math
    hkv = args.hkv or args.h
    dv = args.dv or args.d
    if args.dtype not in ('f32', 'bf16'):
        raise GenError("decode_attention: --dtype must be 'f32' or 'bf16', not %r" % args.dtype)
    if args.cache not in ('f32', 'bf16', 'f16', 'i8'):
        raise GenError("decode_attention: --cache must be 'f32', 'bf16', 'f16' or 'i8', not %r" % args.cache)
    if args.lens not in ('i32', 'i64'):
        raise GenError("decode_attention: --lens must be 'i32' or 'i64', not %r" % args.lens)
    if args.layout not in ('bshd', 'bhsd'):
        raise GenError("decode_attention: --layout must be 'bshd' or 'bhsd', not %r" % args.layout)
    for k, v, hi in (('batch', args.batch, 4096), ('lq', args.lq, 8), ('h', args.h, 256),
                     ('hkv', hkv, 256), ('d', args.d, 4096), ('dv', dv, 4096),
                     ('lmax', args.lmax, 1 << 24)):
        if v < 1 or v > hi:
            raise GenError('decode_attention: --%s %d is outside [1, %d]' % (k, v, hi))
    if args.h % hkv:
        raise GenError('decode_attention: --h %d is not a multiple of --hkv %d' % (args.h, hkv))
    if args.d % 8 or dv % 8:
        raise GenError('decode_attention: --d %d and --dv %d must be multiples of 8' % (args.d, dv))
    if not da_fits(args.batch, args.lq, args.h, hkv, args.d, dv):
        raise GenError('decode_attention: %d query rows x D %d do not fit the instance\'s stack '
                       'state (H x Lq at most 256, H x Lq x D at most 16384 floats)' % (
                           args.h * args.lq, args.d))
    if args.split and args.split not in DA_SPLITS:
        raise GenError('decode_attention: --split must be one of %s, not %d' % (
            ', '.join(map(str, DA_SPLITS)), args.split))
    if args.split and args.autotune:
        raise GenError('decode_attention: --split and --autotune both choose the split')
    name = args.name or c_ident(os.path.splitext(os.path.basename(args.out))[0])
    if not re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', name):
        raise GenError('--name %r is not a C identifier' % name)
    scale = f32(args.scale if args.scale is not None else 1.0 / math.sqrt(args.d))
    if not math.isfinite(scale):
        raise GenError('decode_attention: --scale must be finite')
    key = da_standalone_key(args.batch, args.lq, args.h, hkv, args.d, dv, args.lmax, args.dtype,
                            args.cache, args.lens, args.layout, scale)
    log, split = [], args.split or DA_SPLIT
    if args.autotune:
        tpath = args.tune_cache or default_cache_path()
        cache = load_cache(tpath, cpu_key())
        threads = args.threads or os.cpu_count() or 1
        split = da_tuner(cache, log, threads, library=False)(key)
        if cache.pop('dirty', False):
            save_cache(tpath, cache)
    banner = ['command: kern_gen.py ' + ' '.join(argv),
              'instance: decode_attention q %s, caches %s (%s), k_lens %s: B=%d Lq=%d H=%d Hkv=%d '
              'D=%d Dv=%d Lmax=%d scale=%.9g split=%d' % (
                  args.dtype, args.cache, args.layout, args.lens, args.batch, args.lq, args.h, hkv,
                  args.d, dv, args.lmax, scale, split)] + log
    write_atomic(args.out, emit_decode_attn_standalone(name, key, split, args.layout, scale, banner))


def cmd_sdpa(args, argv):
    import math
    if args.dtype not in ('f32', 'bf16'):
        raise GenError("sdpa: --dtype must be 'f32' or 'bf16', not %r" % args.dtype)
    hkv = args.hkv or args.hq
    for k, v in (('hq', args.hq), ('hkv', hkv), ('lq', args.lq), ('lk', args.lk), ('d', args.d)):
        if v < 1 or v > 1 << 20:
            raise GenError('sdpa: --%s %d is outside [1, 1048576]' % (k, v))
    if args.hq % hkv:
        raise GenError('sdpa: --hq %d is not a multiple of --hkv %d' % (args.hq, hkv))
    if args.d % 8:
        raise GenError('sdpa: --d %d must be a multiple of 8' % args.d)
    if args.causal and args.lq > args.lk:
        raise GenError('sdpa: causal with --lq %d > --lk %d' % (args.lq, args.lk))
    rows = (args.hq // hkv) * args.lq
    if rows * args.d * (2 if args.dtype == 'bf16' else 1) + (2 * args.d if args.dtype == 'bf16' else 0) > 16384:
        raise GenError('sdpa: a K/V group of %d query rows x D %d does not fit the instance\'s '
                       'stack state (at most 16384 floats%s)' % (
                           rows, args.d, '; bf16 also holds q and a K/V row in f32'
                           if args.dtype == 'bf16' else ''))
    name = args.name or c_ident(os.path.splitext(os.path.basename(args.out))[0])
    if not re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', name):
        raise GenError('--name %r is not a C identifier' % name)
    scale = f32(args.scale if args.scale is not None else 1.0 / math.sqrt(args.d))
    banner = ['command: kern_gen.py ' + ' '.join(argv),
              'instance: sdpa %s Hq=%d Hkv=%d Lq=%d Lk=%d D=%d%s scale=%.9g' % (
                  args.dtype, args.hq, hkv, args.lq, args.lk, args.d, ' causal' if args.causal else '',
                  scale)]
    write_atomic(args.out, emit_sdpa(name, args.hq, hkv, args.lq, args.lk, args.d, args.causal,
                                     scale, banner, args.dtype))




# ------------------------------------------------------- qlinear instances
# `kern_gen.py qlinear --m M --n N --k K`: kern_qlinear for one shape.
# y[M,N] = epilogue(dequant(q(x) . Wq^T)) with x [M,K] f32 quantized per
# row by kern's one rule (scale absmax/127 over the finite values, codes
# rne(x / scale) clamped to +-127, NaN 0), W's int8 codes and per-channel
# scales packed once into panels of 16 columns: [K/4][16][4] bytes per
# panel, then the scales. The int8 products are summed exactly in int32
# (AVX2: vpmaddubsw of |q| by w ^ sign mask, plus a per-row correction,
# exact over the whole s8 range of w since |q| <= 127; AVX-512 VNNI:
# vpdpbusd of w + 128 by q, minus 128 times q's sum; the scalar twin in
# plain int32), dequantized as
# (float)acc * sx[m] * sw[n] in that order and passed through kern_gemm's
# epilogue (kern__epilogue_apply_f32), which is what kern_qlinear does: the
# instance gives kern_qlinear's bits on every ISA and thread count.
QL_NR = 32  # columns per panel: 4 AVX2 vectors
QL_DEFAULT = {'mr': 2, 'unroll': 4}
QL_PF = 4096  # bytes of the weight stream prefetched ahead


def qlinear_packed_bytes(N, K):
    NP, K4 = (N + QL_NR - 1) // QL_NR, (K + 3) // 4
    return NP * K4 * 4 * QL_NR + NP * QL_NR * 4


def emit_qlinear(name, M, N, K, banner, impl_only=False, cfg=None, pack_t=True):
    cfg = cfg or QL_DEFAULT
    U = name.upper()
    NP = (N + QL_NR - 1) // QL_NR
    K4 = (K + 3) // 4
    KP = K4 * 4
    PB = qlinear_packed_bytes(N, K)          # codes, then scales
    WB = 3 * M * KP + M * 8                  # x codes, |codes|, sign masks, negsums, scales
    rows = gemm_rows(M, cfg['mr'])
    sto = 'static ' if impl_only else ''
    o = []
    w = o.append
    if impl_only:
        w('')
        w('/* qlinear instance M=%d N=%d K=%d (kern_gen.py qlinear) */' % (M, N, K))
    else:
        emit_banner(w, name, banner)
        w(' * kern_qlinear for one shape: y[%d,%d] = (quant(x) . Wq^T) dequantized (+ bias),' % (M, N))
        w(' * x [%d,%d] f32 quantized per row at run time (kern\'s int8 rule), W [%d,%d]' % (M, K, N, K))
        w(' * packed once: %s_pack quantizes an f32 weight per output channel as' % name)
        w(' * kern_qweight_pack does, %s_pack_int8 takes codes and scales as they' % name)
        w(' * are (the whole s8 range). The products are summed exactly in int32, so')
        w(' * the output equals kern_qlinear\'s bit for bit on every ISA (AVX-512')
        w(' * VNNI, AVX2 or the scalar twin, the context\'s) and thread count (the')
        w(' * column panels split over the context\'s threads). work: %s_WORK_BYTES' % U)
        w(' * bytes of the caller\'s scratch (x\'s codes and scales); packed:')
        w(' * %s_PACKED_BYTES bytes (64-byte alignment is best; any works). */' % U)
        w('#ifndef %s_H' % U)
        w('#define %s_H' % U)
        w('#include "kern.h"')
        w('#define %s_M %d' % (U, M))
        w('#define %s_N %d' % (U, N))
        w('#define %s_K %d' % (U, K))
        w('#define %s_PACKED_BYTES ((size_t)%d)' % (U, PB))
        w('#define %s_WORK_BYTES ((size_t)%d)' % (U, WB))
        w('kern_status %s_pack(kern_ctx *ctx, const float *w, void *packed);' % name)
        w('void %s_pack_int8(const int8_t *wq, const float *scales, void *packed);' % name)
        w('kern_status %s_run(kern_ctx *ctx, const float *x, const void *packed, const float *bias,' % name)
        w('                   float *y, void *work);')
        emit_impl_open(w, U)
    w('')
    w('/* keeps an accumulator in its register at this point: without it GCC')
    w(' * hoists the independent products of the unrolled steps ahead of the')
    w(' * additions and spills the accumulators */')
    w('#if defined(__GNUC__) && defined(KERN_X86)')
    w('#define %s__PIN(v) __asm__("" : "+x"(v));' % name)
    w('#else')
    w('#define %s__PIN(v)' % name)
    w('#endif')
    w('')
    w('%svoid %s_pack_int8(const int8_t *wq, const float *scales, void *packed) {' % (sto, name))
    w('    int8_t *p = (int8_t *)packed;')
    w('    float *sw = (float *)(void *)(p + %d);' % (NP * K4 * 4 * QL_NR))
    w('    for (int64_t q = 0; q < %d; q++)' % NP)
    w('        for (int64_t k4 = 0; k4 < %d; k4++)' % K4)
    w('            for (int j = 0; j < %d; j++)' % QL_NR)
    w('                for (int u = 0; u < 4; u++) {')
    w('                    int64_t n = q * %d + j, k = k4 * 4 + u;' % QL_NR)
    w('                    p[((q * %d + k4) * %d + j) * 4 + u] = n < %d && k < %d ? wq[n * %d + k] : 0;'
      % (K4, QL_NR, N, K, K))
    w('                }')
    w('    for (int64_t n = 0; n < %d; n++) sw[n] = n < %d ? scales[n] : 0.0f;' % (NP * QL_NR, N))
    w('}')
    if pack_t:
        emit_qlinear_pack_t(w, name, N, K)
    if not impl_only:
        w('')
        w('kern_status %s_pack(kern_ctx *ctx, const float *w, void *packed) {' % name)
        w('    kern_tensor t;')
        w('    if (!w || !packed) return kern__err(KERN_ERR_ARG, "%s_pack: w or packed is NULL");' % name)
        w('    t = kern_tensor_2d(w, KERN_F32, %d, %d);' % (N, K))
        w('    return %s__pack_t(ctx, &t, packed);' % name)
        w('}')
    emit_qlinear_body(w, name, M, N, K, NP, K4, KP, WB, rows, cfg)
    if impl_only:
        return '\n'.join(o) + '\n'
    w('')
    w('kern_status %s_run(kern_ctx *ctx, const float *x, const void *packed, const float *bias,' % name)
    w('                   float *y, void *work) {')
    w('    kern_epilogue ep;')
    w('    kern_tensor tb;')
    w('    if (!x || !packed || !y || !work)')
    w('        return kern__err(KERN_ERR_ARG, "%s_run: x, packed, y or work is NULL");' % name)
    w('    memset(&ep, 0, sizeof ep);')
    w('    if (bias) {')
    w('        tb = kern_tensor_1d(bias, KERN_F32, %d);' % N)
    w('        ep.bias = &tb;')
    w('    }')
    w('    return %s__run_epi(ctx, x, (const int8_t *)packed, y, bias ? &ep : NULL, work);' % name)
    w('}')
    emit_impl_close(w, U)
    return '\n'.join(o) + '\n'


def emit_qlinear_pack_t(w, name, N, K):
    w('')
    w('/* w [%d,%d] f32/bf16 (any strides kern_qweight_pack takes): its codes and' % (N, K))
    w(' * scales are kern_qweight_pack\'s (through kern_qweight_unpack), so the')
    w(' * instance multiplies what kern_qlinear would. */')
    w('static kern_status %s__pack_t(kern_ctx *ctx, const kern_tensor *w, void *packed) {' % name)
    w('    kern_qweight *qw = NULL;')
    w('    kern_tensor tq, ts;')
    w('    int8_t *codes;')
    w('    kern_status st = kern_qweight_pack(ctx, w, &qw, NULL);')
    w('    if (st) return st;')
    w('    codes = (int8_t *)kern__alloc(ctx, (size_t)%d);' % (N * K + N * 4 + 4))
    w('    if (!codes) {')
    w('        kern_qweight_free(ctx, qw);')
    w('        return kern__err(KERN_ERR_NOMEM, "%s_pack: out of memory");' % name)
    w('    }')
    w('    tq = kern_tensor_2d(codes, KERN_I8, %d, %d);' % (N, K))
    w('    ts = kern_tensor_1d(codes + %d, KERN_F32, %d);' % ((N * K + 3) // 4 * 4, N))
    w('    st = kern_qweight_unpack(qw, &tq, &ts);')
    w('    if (!st) %s_pack_int8(codes, (const float *)(const void *)(codes + %d), packed);' % (
        name, (N * K + 3) // 4 * 4))
    w('    kern__free(ctx, codes);')
    w('    kern_qweight_free(ctx, qw);')
    w('    return st;')
    w('}')


QL_ISAS = ('scalar', 'avx2', 'vnni')
QL_VNNI_MR = 6


def emit_qlinear_mk_vnni(w, name, N, K4, KP, r, cfg):
    """The AVX-512 VNNI r-row micro-kernel: vpdpbusd of the weight bytes
    made unsigned (w ^ 0x80 = w + 128, once per vector for all rows) by
    the row's signed codes, 4 k a lane; neg holds -128 times the row's code
    sum, so acc + neg is sum q w exactly (the int32 wrap cancels: the true
    sum fits, the K bound of the instance). The same integers as the other
    bodies, dequantized in the same order: the same bits."""
    isa_begin(w, 'vnni')
    w('static void %s__mk%d_vnni(const int8_t *xq, const uint8_t *xu, const int8_t *xm,' % (name, r))
    w('                         const int32_t *neg, const int8_t *bp, const float *sx,')
    w('                         const float *sw, float *y, int64_t ncols) {')
    w('    float t[%d][%d];' % (r, QL_NR))
    w('    const __m512i flip = _mm512_set1_epi8((char)0x80);')
    w('    (void)xu;')
    w('    (void)xm;')
    for i in range(r):
        w('    __m512i c%d_0 = _mm512_setzero_si512(), c%d_1 = _mm512_setzero_si512();' % (i, i))

    def kstep(kx):
        L = ['{']
        for ln in range(QL_NR * 4 // 64):
            L.append('    _mm_prefetch((const char *)(bp + (%s) * %d + %d), _MM_HINT_T0);' % (
                kx, QL_NR * 4, QL_PF + 64 * ln))
        L.append('    const __m512i w0 = _mm512_xor_si512(_mm512_loadu_si512((const void *)(bp + (%s) * %d)), flip);'
                 % (kx, QL_NR * 4))
        L.append('    const __m512i w1 = _mm512_xor_si512(_mm512_loadu_si512((const void *)(bp + (%s) * %d + 64)), flip);'
                 % (kx, QL_NR * 4))
        for i in range(r):
            L.append('    { int32_t v; memcpy(&v, xq + %d + (%s) * 4, 4); const __m512i q = _mm512_set1_epi32(v);'
                     ' c%d_0 = _mm512_dpbusd_epi32(c%d_0, w0, q); c%d_1 = _mm512_dpbusd_epi32(c%d_1, w1, q); }'
                     % (i * KP, kx, i, i, i, i))
        L.append('}')
        return L
    emit_kloop(w, K4, cfg['unroll'], kstep)
    for i in range(r):
        for h in (0, 1):
            w('    c%d_%d = _mm512_add_epi32(c%d_%d, _mm512_set1_epi32(neg[%d]));' % (i, h, i, h, i))
            w('    _mm512_storeu_ps(t[%d] + %d, _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(c%d_%d), _mm512_set1_ps(sx[%d])), _mm512_loadu_ps(sw + %d)));'
              % (i, 16 * h, i, h, i, 16 * h))
    w('    for (int i = 0; i < %d; i++)' % r)
    w('        for (int64_t j = 0; j < ncols; j++) y[i * %d + j] = t[i][j];' % N)
    w('}')
    isa_end(w, 'vnni')


def emit_qlinear_body(w, name, M, N, K, NP, K4, KP, WB, rows, cfg):
    # x quantization: kern's rule, the scalar row and its AVX2 twin
    for isa in ('scalar', 'avx2'):
        isa_begin(w, isa)
        w('static float %s__quant_%s(const float *x, int8_t *q) {' % (name, isa))
        if isa == 'scalar':
            w('    float am = 0.0f, s, inv;')
            w('    for (int64_t k = 0; k < %d; k++) {' % K)
            w('        float a = fabsf(x[k]);')
            w('        if (a < INFINITY && a > am) am = a;')
            w('    }')
        else:
            K8 = K // 8 * 8
            w('    __m256 m = _mm256_setzero_ps();')
            w('    float am, s, inv;')
            w('    int64_t k;')
            w('    for (k = 0; k < %d; k += 8) {' % K8)
            w('        __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_loadu_ps(x + k));')
            w('        m = _mm256_max_ps(m, _mm256_blendv_ps(_mm256_setzero_ps(), a,')
            w('                                              _mm256_cmp_ps(a, _mm256_set1_ps(INFINITY), _CMP_LT_OQ)));')
            w('    }')
            w('    {')
            w('        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));')
            w('        h = _mm_max_ps(h, _mm_movehl_ps(h, h));')
            w('        h = _mm_max_ss(h, _mm_movehdup_ps(h));')
            w('        am = _mm_cvtss_f32(h);')
            w('    }')
            if K8 < K:
                w('    for (k = %d; k < %d; k++) {' % (K8, K))
                w('        float a = fabsf(x[k]);')
                w('        if (a < INFINITY && a > am) am = a;')
                w('    }')
        w('    s = am / 127.0f;')
        w('    if (am == 0.0f) s = 1.0f;')
        w('    if (s < 1.17549435e-38f) s = 1.17549435e-38f;')
        w('    inv = 1.0f / s;')
        if isa == 'scalar':
            w('    for (int64_t k = 0; k < %d; k++) {' % K)
        else:
            w('    for (k = 0; k < %d; k += 8) {' % K8)
            w('        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + k), _mm256_set1_ps(inv));')
            w('        __m128i l, h;')
            w('        v = _mm256_blendv_ps(_mm256_setzero_ps(), v, _mm256_cmp_ps(v, v, _CMP_EQ_OQ));')
            w('        v = _mm256_min_ps(_mm256_set1_ps(127.0f), _mm256_max_ps(_mm256_set1_ps(-127.0f), v));')
            w('        l = _mm256_castsi256_si128(_mm256_cvtps_epi32(v));')
            w('        h = _mm256_extracti128_si256(_mm256_cvtps_epi32(v), 1);')
            w('        l = _mm_packs_epi32(l, h);')
            w('        _mm_storel_epi64((__m128i *)(void *)(q + k), _mm_packs_epi16(l, l));')
            w('    }')
            w('    for (k = %d; k < %d; k++) {' % (K8, K))
        w('        float v = x[k] * inv;')
        w('        if (v != v) v = 0.0f;')
        w('        v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;')
        w('        q[k] = (int8_t)((v + 12582912.0f) - 12582912.0f); /* rne: |v| <= 127 */')
        w('    }')
        if KP > K:
            w('    for (int64_t k2 = %d; k2 < %d; k2++) q[k2] = 0;' % (K, KP))
        w('    return s;')
        w('}')
        isa_end(w, isa)
    # sign-magnitude split of a row of codes (AVX2 kernels): u = |q| as u8,
    # m = q < 0 ? 0xff : 0, and the sum of |q| over q < 0. For q < 0,
    # |q| * (w ^ m) = |q| * (-w - 1) = q * w - |q|, so the kernel's sum of
    # |q| * (w ^ m) plus that correction is sum q * w exactly; |q| <= 127
    # and w ^ m in [-128, 127] keep vpmaddubsw's pair sums in int16.
    w('')
    w('#ifdef KERN_X86')
    w('KERN_TARGET_AVX2')
    w('static int32_t %s__sm_avx2(const int8_t *q, uint8_t *u, int8_t *m) {' % name)
    w('    __m256i acc = _mm256_setzero_si256();')
    w('    int64_t k;')
    w('    int32_t neg;')
    KP32 = KP // 32 * 32
    w('    for (k = 0; k < %d; k += 32) {' % KP32)
    w('        const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(q + k));')
    w('        const __m256i a = _mm256_abs_epi8(v), s = _mm256_cmpgt_epi8(_mm256_setzero_si256(), v);')
    w('        _mm256_storeu_si256((__m256i *)(void *)(u + k), a);')
    w('        _mm256_storeu_si256((__m256i *)(void *)(m + k), s);')
    w('        acc = _mm256_add_epi64(acc, _mm256_sad_epu8(_mm256_and_si256(a, s), _mm256_setzero_si256()));')
    w('    }')
    w('    {')
    w('        int64_t l[4];')
    w('        _mm256_storeu_si256((__m256i *)(void *)l, acc);')
    w('        neg = (int32_t)(l[0] + l[1] + l[2] + l[3]);')
    w('    }')
    if KP32 < KP:
        w('    for (k = %d; k < %d; k++) {' % (KP32, KP))
        w('        u[k] = (uint8_t)(q[k] < 0 ? -q[k] : q[k]);')
        w('        m[k] = (int8_t)(q[k] < 0 ? -1 : 0);')
        w('        neg += q[k] < 0 ? -q[k] : 0;')
        w('    }')
    w('    return neg;')
    w('}')
    w('#endif')
    # micro-kernels: r rows x 16 columns
    for r in sorted(set(r for _, r in rows)):
        for isa in ('scalar', 'avx2'):
            isa_begin(w, isa)
            w('static void %s__mk%d_%s(const int8_t *xq, const uint8_t *xu, const int8_t *xm,' % (name, r, isa))
            w('                         const int32_t *neg, const int8_t *bp, const float *sx,')
            w('                         const float *sw, float *y, int64_t ncols) {')
            w('    float t[%d][%d];' % (r, QL_NR))
            if isa == 'avx2':
                w('    const __m256i one = _mm256_set1_epi16(1);')
                w('    (void)xq;')
                for i in range(r):
                    w('    __m256i %s;' % ', '.join('c%d_%d = _mm256_setzero_si256()' % (i, j)
                                                    for j in range(QL_NR // 8)))

                def kstep(kx):
                    L = ['{']
                    for ln in range(QL_NR * 4 // 64):
                        L.append('    _mm_prefetch((const char *)(bp + (%s) * %d + %d), _MM_HINT_T0);' % (
                            kx, QL_NR * 4, QL_PF + 64 * ln))
                    L.append('    __m256i w;')
                    for i in range(r):
                        L.append('    int32_t v%d; __m256i u%d, m%d; memcpy(&v%d, xu + %d + (%s) * 4, 4); u%d = _mm256_set1_epi32(v%d);'
                                 ' memcpy(&v%d, xm + %d + (%s) * 4, 4); m%d = _mm256_set1_epi32(v%d);'
                                 % (i, i, i, i, i * KP, kx, i, i, i, i * KP, kx, i, i))
                    for j in range(QL_NR // 8):
                        L.append('    w = _mm256_loadu_si256((const __m256i *)(const void *)(bp + (%s) * %d + %d));' % (
                            kx, QL_NR * 4, 32 * j))
                        for i in range(r):
                            L.append('    c%d_%d = _mm256_add_epi32(c%d_%d, _mm256_madd_epi16(_mm256_maddubs_epi16(u%d, _mm256_xor_si256(w, m%d)), one)); %s__PIN(c%d_%d)'
                                     % (i, j, i, j, i, i, name, i, j))
                    L.append('}')
                    return L
            else:
                w('    int32_t c[%d][%d];' % (r, QL_NR))
                w('    (void)xu;')
                w('    (void)xm;')
                w('    (void)neg;')
                w('    memset(c, 0, sizeof c);')

                def kstep(kx):
                    L = ['{', '    const int8_t *b = bp + (%s) * %d;' % (kx, QL_NR * 4)]
                    for i in range(r):
                        L.append('    for (int u = 0; u < 4; u++) { const int32_t a = xq[%d + (%s) * 4 + u];'
                                 ' for (int j = 0; j < %d; j++) c[%d][j] += a * b[j * 4 + u]; }' % (i * KP, kx, QL_NR, i))
                    L.append('}')
                    return L
            emit_kloop(w, K4, cfg['unroll'], kstep)
            # dequantize: (float)acc * sx[i] * sw[j], in that order
            if isa == 'avx2':
                w('    {')
                for i in range(r):  # the sign-mask correction (see __sm)
                    for j in range(QL_NR // 8):
                        w('        c%d_%d = _mm256_add_epi32(c%d_%d, _mm256_set1_epi32(neg[%d]));' % (i, j, i, j, i))
                for i in range(r):
                    for j in range(QL_NR // 8):
                        w('        _mm256_storeu_ps(t[%d] + %d, _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(c%d_%d), _mm256_set1_ps(sx[%d])), _mm256_loadu_ps(sw + %d)));'
                          % (i, 8 * j, i, j, i, 8 * j))
                w('    }')
            else:
                w('    for (int i = 0; i < %d; i++)' % r)
                w('        for (int j = 0; j < %d; j++) t[i][j] = (float)c[i][j] * sx[i] * sw[j];' % QL_NR)
            w('    for (int i = 0; i < %d; i++)' % r)
            w('        for (int64_t j = 0; j < ncols; j++) y[i * %d + j] = t[i][j];' % N)
            w('}')
            isa_end(w, isa)
    # the VNNI body takes up to QL_VNNI_MR rows a call whatever the tiles
    # (12 accumulators; the rows' sums and dequantization do not depend on
    # the grouping)
    vrows = gemm_rows(M, QL_VNNI_MR)
    for r in sorted(set(r for _, r in vrows)):
        emit_qlinear_mk_vnni(w, name, N, K4, KP, r, cfg)
    for isa in QL_ISAS:
        isa_begin(w, isa, target=False)
        w('static void %s__panels_%s(const int8_t *xq, const uint8_t *xu, const int8_t *xm,' % (name, isa))
        w('                         const int32_t *neg, const float *sx, const int8_t *packed, float *y,')
        w('                         int64_t p0, int64_t p1) {')
        w('    const float *sw = (const float *)(const void *)(packed + %d);' % (NP * K4 * 4 * QL_NR))
        w('    for (int64_t p = p0; p < p1; p++) {')
        w('        const int8_t *bp = packed + p * %d;' % (K4 * 4 * QL_NR))
        w('        int64_t nc = %d - p * %d < %d ? %d - p * %d : %d;' % (N, QL_NR, QL_NR, N, QL_NR, QL_NR))
        for m0, r in (vrows if isa == 'vnni' else rows):
            w('        %s__mk%d_%s(xq + %d, xu + %d, xm + %d, neg + %d, bp, sx + %d, sw + p * %d, y + %d + p * %d, nc);' % (
                name, r, isa, m0 * KP, m0 * KP, m0 * KP, m0, m0, QL_NR, m0 * N, QL_NR))
        w('    }')
        w('}')
        isa_end(w, isa)
    w('')
    w('typedef struct %s__args {' % name)
    w('    kern_ctx *ctx;')
    w('    const int8_t *xq, *xm, *packed;')
    w('    const uint8_t *xu;')
    w('    const int32_t *neg;')
    w('    const float *sx;')
    w('    float *y;')
    w('    const kern_epilogue *epi;')
    w('    int64_t per;')
    w('} %s__args;' % name)
    w('')
    w('/* 2: AVX-512 VNNI, 1: AVX2, 0: the scalar twin */')
    w('static int %s__level(kern_ctx *ctx) {' % name)
    w('#ifdef KERN_X86')
    w('    if (kern_ctx_isa(ctx) >= KERN_ISA_AVX512_VNNI && kern_ctx_isa(ctx) < KERN_ISA_NEON) return 2;')
    w('    return kern_ctx_isa(ctx) >= KERN_ISA_AVX2 && kern_ctx_isa(ctx) < KERN_ISA_NEON;')
    w('#else')
    w('    (void)ctx;')
    w('    return 0;')
    w('#endif')
    w('}')
    w('')
    w('/* panels [t per, (t + 1) per) and their epilogue */')
    w('static void %s__task(void *arg, int64_t t, int thread) {' % name)
    w('    const %s__args *a = (const %s__args *)arg;' % (name, name))
    w('    int64_t p0 = t * a->per, p1 = p0 + a->per < %d ? p0 + a->per : %d;' % (NP, NP))
    w('    (void)thread;')
    w('#ifdef KERN_X86')
    w('    if (%s__level(a->ctx) == 2)' % name)
    w('        %s__panels_vnni(a->xq, a->xu, a->xm, a->neg, a->sx, a->packed, a->y, p0, p1);' % name)
    w('    else if (%s__level(a->ctx))' % name)
    w('        %s__panels_avx2(a->xq, a->xu, a->xm, a->neg, a->sx, a->packed, a->y, p0, p1);' % name)
    w('    else')
    w('#endif')
    w('        %s__panels_scalar(a->xq, a->xu, a->xm, a->neg, a->sx, a->packed, a->y, p0, p1);' % name)
    emit_task_epilogue(w, M, N, QL_NR, '1.0f')
    w('}')
    w('')
    w('/* x quantized into work (%d bytes: codes, then scales), then the column' % WB)
    w(' * panels split over the context\'s threads, each with its epilogue */')
    w('static kern_status %s__run_epi(kern_ctx *ctx, const float *x, const int8_t *packed, float *y,' % name)
    w('                               const kern_epilogue *epi, void *work) {')
    w('    %s__args a;' % name)
    w('    int8_t *xq = (int8_t *)work, *xm = xq + %d;' % (2 * M * KP))
    w('    uint8_t *xu = (uint8_t *)work + %d;' % (M * KP))
    w('    int32_t *neg = (int32_t *)(void *)(xq + %d);' % (3 * M * KP))
    w('    float *sx = (float *)(void *)(xq + %d);' % (3 * M * KP + 4 * M))
    w('    kern_status st = KERN_OK;')
    w('    int level = %s__level(ctx);' % name)
    w('    for (int64_t m = 0; m < %d; m++) {' % M)
    w('#ifdef KERN_X86')
    w('        if (level == 2) { /* VNNI: the codes, and -128 times their sum */')
    w('            int32_t qs = 0;')
    w('            sx[m] = %s__quant_avx2(x + m * %d, xq + m * %d);' % (name, K, KP))
    w('            for (int64_t k = 0; k < %d; k++) qs += xq[m * %d + k];' % (KP, KP))
    w('            neg[m] = (int32_t)((uint32_t)qs * 4294967168u); /* -128 qs, wrapping */')
    w('            continue;')
    w('        }')
    w('        if (level) {')
    w('            sx[m] = %s__quant_avx2(x + m * %d, xq + m * %d);' % (name, K, KP))
    w('            neg[m] = %s__sm_avx2(xq + m * %d, xu + m * %d, xm + m * %d);' % (name, KP, KP, KP))
    w('            continue;')
    w('        }')
    w('#endif')
    w('        sx[m] = %s__quant_scalar(x + m * %d, xq + m * %d);' % (name, K, KP))
    w('        neg[m] = 0; /* the scalar kernel multiplies the codes themselves */')
    w('    }')
    w('    (void)level;')
    w('    a.ctx = ctx;')
    w('    a.xq = xq;')
    w('    a.xu = xu;')
    w('    a.xm = xm;')
    w('    a.neg = neg;')
    w('    a.sx = sx;')
    w('    a.packed = packed;')
    w('    a.y = y;')
    w('    a.epi = epi;')
    emit_panel_split(w, name, NP, str(TPT_DEFAULT))
    w('    return st;')
    w('}')


def cmd_qlinear(args, argv):
    for k in ('m', 'n', 'k'):
        v = getattr(args, k)
        if v < 1 or v > 1 << 20:
            raise GenError('qlinear: --%s %d is outside [1, 1048576]' % (k, v))
    if args.k > 131071:
        raise GenError('qlinear: --k %d is over kern_qlinear\'s limit (131071)' % args.k)
    if args.m * args.k > 1 << 26 or args.n * args.k > 1 << 30:
        raise GenError('qlinear: %dx%dx%d is too large for one instance' % (args.m, args.n, args.k))
    name = args.name or c_ident(os.path.splitext(os.path.basename(args.out))[0])
    if not re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', name):
        raise GenError('--name %r is not a C identifier' % name)
    cfg = dict(QL_DEFAULT)
    if args.blocking and args.autotune:
        raise GenError('qlinear: --blocking and --autotune both choose the blocking')
    if args.blocking:
        try:
            mr, unroll = (int(v) for v in args.blocking.split(','))
        except ValueError:
            raise GenError('--blocking: expected MR,UNROLL, got %r' % args.blocking)
        if not (1 <= mr <= 3 and unroll in (1, 2, 4, 8)):
            raise GenError('--blocking: MR in 1..3, UNROLL 1, 2, 4 or 8')
        cfg = {'mr': mr, 'unroll': unroll}
    log = []
    if args.autotune:
        tpath = args.tune_cache or default_cache_path()
        cache = load_cache(tpath, cpu_key())
        cfg = tune_qlinear(args.m, args.n, args.k, cache, log, args.threads or os.cpu_count() or 1)
        if cache.pop('dirty', False):
            save_cache(tpath, cache)
    banner = ['command: kern_gen.py ' + ' '.join(argv),
              'instance: qlinear int8 dynamic M=%d N=%d K=%d (x f32, y f32)' % (args.m, args.n, args.k),
              'blocking: mr=%d unroll=%d' % (cfg['mr'], cfg['unroll'])] + log
    write_atomic(args.out, emit_qlinear(name, args.m, args.n, args.k, banner, cfg=cfg))


if __name__ == '__main__':
    sys.exit(main())
