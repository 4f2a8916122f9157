#!/usr/bin/env python3
"""fuzz_gen.py [--seconds S] [--seed N] [--out DIR] -- gen/kern_gen.py on
mutated inputs: the IR files of tests/gen (lines deleted, duplicated,
swapped, truncated; tokens replaced by names, numbers, dtypes, ops and
punctuation from the corpus or by extreme values; bytes inserted) with
their bindings and a random choice of --specialize-max-m, --quantize,
--sparsify and --no-fuse, and a safetensors file for bert1 with its
header and sizes mutated. Every run must end in a header written (exit 0)
or kern_gen.py's message (exit 2, GenError): an uncaught exception is a
crash, and the input that caused it is kept in DIR (default
build/gen/fuzz_crash) with the traceback. Standard library only; the
generator runs in this process. Exit 1 if anything crashed.

--executor build/kern-run: also loads and plans every IR mutant the
generator accepted with the executor (kern-run --random-weights --runs
0) and reports, once per kind of message, where it refuses what the
generator took (a disagreement between the two readers; refusals about
the random weights' values, or memory, are not counted); the inputs go
to DIR as diff-*.kg. A developer's tool: not part of make fuzz."""
import argparse
import io
import json
import os
import random
import re
import struct
import sys
import tempfile
import time
import traceback
import contextlib

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'gen'))
import kern_gen  # noqa: E402

EXTREME = ['0', '-1', '1', '2', '7', '8', '64', '65535', '2147483647', '2147483648', '-2147483649',
           '9223372036854775807', '99999999999999999999', '1e308', '-0', 'nan', 'inf', '0x10', '1.5', '']
PUNCT = ['[', ']', ',', '(', ')', '=', '-', '*', ' ', '#', 'x', '\t', '[]', '[,]', '[0]', '-1]']


def bindings():
    out = {}
    with open(os.path.join(ROOT, 'mk', 'gen.mk')) as f:
        for line in f:
            m = re.match(r'GEN_BIND_(\w+) := (\S+)', line)
            if m:
                out[m.group(1)] = m.group(2)
    return out


def seeds():
    d = os.path.join(ROOT, 'tests', 'gen')
    bind = bindings()
    out = []
    for fn in sorted(os.listdir(d)):
        if fn.endswith('.kg'):
            with open(os.path.join(d, fn)) as f:
                out.append((fn[:-3], f.read(), bind.get(fn[:-3], '')))
    return out


def mutate(r, text, vocab):
    lines = text.split('\n')
    for _ in range(r.randint(1, 4)):
        k = r.randrange(9)
        i = r.randrange(len(lines)) if lines else 0
        if not lines:
            lines = ['']
        if k == 0:
            del lines[i]
        elif k == 1:
            lines.insert(i, lines[r.randrange(len(lines))])
        elif k == 2:
            j = r.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif k == 3:  # a token replaced by another one of the corpus
            toks = re.split(r'(\W)', lines[i])
            words = [n for n, t in enumerate(toks) if t.strip()]
            if words:
                toks[r.choice(words)] = r.choice(vocab)
                lines[i] = ''.join(toks)
        elif k == 4:  # a number replaced by an extreme one
            nums = list(re.finditer(r'-?\d+(\.\d+)?', lines[i]))
            if nums:
                m = r.choice(nums)
                lines[i] = lines[i][:m.start()] + r.choice(EXTREME) + lines[i][m.end():]
        elif k == 5:
            p = r.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:p] + r.choice(PUNCT) + lines[i][p:]
        elif k == 6:
            lines[i] = lines[i][:r.randrange(len(lines[i]) + 1)]
        elif k == 7:
            del lines[r.randrange(len(lines)):]
        else:
            p = r.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:p] + ''.join(chr(r.randrange(1, 0x3000)) for _ in range(r.randint(1, 3))) + \
                lines[i][p:]
    return '\n'.join(lines)


def mutate_bind(r, bind):
    if r.random() < 0.8:
        return bind
    return r.choice(['', 'B=0,L=1', 'B=1', 'L=3', 'B=2,L=2147483648', 'B=-1,L=2', 'Q=3', 'B=2,L=x',
                     'B=2,,L=3', bind + ',' + bind, '=3'])


def run_gen(argv):
    """kern_gen.main(argv): (returned, None) or (None, traceback text)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return kern_gen.main(argv), None
    except SystemExit as e:  # argparse: only from an argv this script got wrong
        return e.code, None
    except Exception:  # noqa: BLE001 -- any other exception is the finding
        return None, traceback.format_exc()


def st_file(r, tmp):
    """bert1's weights in a safetensors file (tests/gen/write_st.py's
    layout), then mutated: its header text, its length field or the file
    cut short."""
    g = kern_gen.parse_ir(open(os.path.join(ROOT, 'tests', 'gen', 'bert1.kg')).read(), 'bert1.kg')
    low = kern_gen.Lowering(g, kern_gen.parse_bind('B=2,L=7'), 'st')
    hdr, off = {'__metadata__': {'format': 'pt'}}, 0
    for v in low.weights:
        n = v.numel() * 4
        hdr[v.name] = {'dtype': 'F32', 'shape': list(v.shape), 'data_offsets': [off, off + n]}
        off += n
    k = r.randrange(6)
    names = [n for n in hdr if n != '__metadata__']
    e = hdr[r.choice(names)]
    if k == 0:
        e['dtype'] = r.choice(['F16', 'BF16', 'I8', 'BOOL', 'F64', 'X', 7, None])
    elif k == 1:
        e['shape'] = r.choice([[], [0], [-1], [1 << 62, 2], [3.5], 'x', [e['shape'][0]] * 5])
    elif k == 2:
        e['data_offsets'] = r.choice([[0], [5, 1], [-8, 0], [0, 1 << 62], ['a', 'b'], None,
                                      [e['data_offsets'][0] + 1, e['data_offsets'][1] + 1]])
    elif k == 3:
        del hdr[r.choice(names)]
    h = json.dumps(hdr).encode()
    if k == 4:  # the JSON text itself
        p = r.randrange(len(h))
        h = h[:p] + bytes([r.randrange(256)]) + h[p + 1:]
    h += b' ' * (-len(h) % 8)
    n = len(h)
    if k == 5:
        n = r.choice([0, 1, 7, len(h) - 1, len(h) + 8, 1 << 40, (1 << 64) - 1])
    blob = struct.pack('<Q', n) + h + b'\0' * off
    if r.random() < 0.2:
        blob = blob[:r.randrange(len(blob))]
    path = os.path.join(tmp, 'w.safetensors')
    with open(path, 'wb') as f:
        f.write(blob)
    return path, blob


# executor refusals that come from kern-run's random weights or from the
# machine, not from the graph; and the one known difference: a declared dim
# no shape uses may stay unbound in generated code (its banner says
# "unbound (unused)"), while the executor's plan binds every symbol
DATA_ERRORS = ('out of memory', 'is not finite and positive', 'is not 2:4 sparse', 'timed out',
               'run: kern_graph_run', 'is not bound (params.bind')


def compare_executor(a, argv, what, seed, runs, seen):
    """1 when the executor refuses, for a new kind of reason, an IR the
    generator accepted (the input kept in a.out), else 0."""
    import subprocess
    cmd = [a.executor, argv[1], '--random-weights', '--runs', '0']
    for opt in ('--bind', '--quantize', '--sparsify'):  # the plan's transforms too
        if opt in argv:
            cmd += [opt, argv[argv.index(opt) + 1]]
    try:
        k = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                           timeout=20)
        msg = (k.stderr.strip().split('\n') or [''])[-1] if k.returncode else ''
    except subprocess.TimeoutExpired:
        msg = 'timed out'
    if not msg or any(d in msg for d in DATA_ERRORS):
        return 0
    kind = re.sub(r"'[^']*'|\[[^]]*\]|-?\d+", '#', msg.split('kern_graph_read_ir: ')[-1])[:90]
    if kind in seen:
        return 0
    seen.add(kind)
    os.makedirs(a.out, exist_ok=True)
    base = os.path.join(a.out, 'diff-%d-%d' % (seed, runs))
    with open(base + '.kg', 'wb') as f:
        f.write(what)
    sys.stdout.write('fuzz_gen: the executor refuses what the generator took (%s.kg, %s): %s\n' % (
        base, ' '.join(argv[4:]), msg))
    return 1


SMALL = ['-5', '0', '1', '2', '3', '5', '8', '12', '16', '24', '40', '64', '2097152', '1099511627776', 'x', '']


def standalone_argv(r, out_h):
    """A standalone command (gemm, qlinear, norm, sdpa, decode_attention)
    with random small or out-of-range arguments."""
    def v():
        return r.choice(SMALL)
    cmd = r.choice(['gemm', 'qlinear', 'norm', 'sdpa', 'decode_attention'])
    if cmd in ('gemm', 'qlinear'):
        argv = [cmd, '--m', v(), '--n', v(), '--k', v()]
        if r.random() < 0.3:
            argv += ['--blocking', ','.join(r.choice(['0', '1', '2', '3', '4', '6', '8', '9', 'a'])
                                            for _ in range(r.randint(1, 4)))]
        if cmd == 'gemm' and r.random() < 0.5:
            argv += ['--dtype', r.choice(['f32', 'bf16', 'f16', 'i8'])]
    elif cmd == 'norm':
        argv = [cmd, '--rows', v(), '--h', v(), '--kind', r.choice(['layer', 'rms', 'batch']),
                '--dtype', r.choice(['f32', 'bf16', 'f16']), '--weight-dtype', r.choice(['', 'f32', 'bf16', 'i8'])]
        if r.random() < 0.3:
            argv += ['--eps', r.choice(['0', '-1', '1e-5', 'nan', 'inf', '1e40'])]
    elif cmd == 'sdpa':
        argv = [cmd, '--hq', v(), '--hkv', v(), '--lq', v(), '--lk', v(), '--d', v(),
                '--dtype', r.choice(['f32', 'bf16', 'f16'])]
        if r.random() < 0.3:
            argv.append('--causal')
        if r.random() < 0.3:
            argv += ['--scale', r.choice(['0', '-1', '0.125', 'nan', 'inf', '1e40'])]
    else:
        argv = [cmd, '--batch', v(), '--lq', v(), '--h', v(), '--hkv', v(), '--d', v(), '--lmax', v(),
                '--dtype', r.choice(['f32', 'bf16', 'f16']), '--cache', r.choice(['', 'f32', 'bf16', 'f16', 'i8', 'u8']),
                '--lens', r.choice(['i32', 'i64', 'f32']), '--layout', r.choice(['bshd', 'bhsd', 'x'])]
        if r.random() < 0.3:
            argv += ['--dv', v()]
        if r.random() < 0.3:
            argv += ['--split', r.choice(['0', '64', '100', '512', '-1'])]
        if r.random() < 0.3:
            argv += ['--scale', r.choice(['0', '-1', '0.125', 'nan', 'inf', '1e40'])]
    return argv + ['-o', out_h]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--seconds', type=float, default=20)
    ap.add_argument('--seed', type=int, default=None)
    ap.add_argument('--out', default=os.path.join(ROOT, 'build', 'gen', 'fuzz_crash'))
    ap.add_argument('--executor', default='', metavar='KERN_RUN')
    a = ap.parse_args()
    seen = set()
    seed = a.seed if a.seed is not None else int(time.time())
    r = random.Random(seed)
    corpus = seeds()
    vocab = sorted(set(t for _, text, _ in corpus for t in re.findall(r'[\w.]+', text)))
    vocab += list(kern_gen.OPS) + list(kern_gen.DTYPES)
    runs = ok = refused = crashes = 0
    t_end = time.time() + a.seconds
    with tempfile.TemporaryDirectory(prefix='kern_fuzz_gen.') as tmp:
        out_h = os.path.join(tmp, 'out.h')
        while time.time() < t_end:
            runs += 1
            if r.random() < 0.1:
                argv = standalone_argv(r, out_h)
                what = ' '.join(argv).encode()
            elif r.random() < 0.15:
                path, data = st_file(r, tmp)
                argv = ['model', os.path.join(ROOT, 'tests', 'gen', 'bert1.kg'), '--bind', 'B=2,L=7',
                        '--safetensors', path, '-o', out_h]
                what = data
            else:
                name, text, bind = r.choice(corpus)
                text = mutate(r, text, vocab)
                path = os.path.join(tmp, 'in.kg')
                with open(path, 'w', encoding='utf-8', errors='surrogatepass') as f:
                    f.write(text)
                argv = ['model', path, '-o', out_h]
                b = mutate_bind(r, bind)
                if b:
                    argv += ['--bind', b]
                if r.random() < 0.4:
                    argv += ['--specialize-max-m', r.choice(['1', '8', '64'])]
                if r.random() < 0.2:
                    argv += ['--quantize', r.choice(['*', '*attn*', 'l0.*'])]
                if r.random() < 0.15:
                    argv += ['--sparsify', r.choice(['*', '*mlp*'])]
                if r.random() < 0.15:
                    argv += ['--no-fuse', r.choice(['all', 'epilogue', 'qkv,dce'])]
                what = text.encode('utf-8', 'surrogatepass')
            rc, tb = run_gen(argv)
            if a.executor and tb is None and rc == 0 and argv[0] == 'model' and '--safetensors' not in argv:
                crashes += compare_executor(a, argv, what, seed, runs, seen)
            if tb is None:
                ok += rc == 0
                refused += rc == 2
                if rc not in (0, 2):
                    tb = 'exit %r' % rc
            if tb is not None:
                crashes += 1
                os.makedirs(a.out, exist_ok=True)
                base = os.path.join(a.out, 'crash-%d-%d' % (seed, runs))
                with open(base + '.input', 'wb') as f:
                    f.write(what)
                with open(base + '.txt', 'w') as f:
                    f.write('argv: %s\n\n%s' % (' '.join(argv), tb))
                sys.stdout.write('fuzz_gen: crash (%s): %s\n' % (base + '.txt', tb.strip().split('\n')[-1]))
    print('fuzz_gen: seed %d, %d runs in %.0f s: %d generated, %d refused with a message, %d crashes' % (
        seed, runs, a.seconds, ok, refused, crashes))
    return 1 if crashes else 0


if __name__ == '__main__':
    sys.exit(main())
