#!/usr/bin/env python3
"""llama_ir.py -- writes the text IR (docs/graph.md) of one step of a
Llama-style decoder through a KV cache: embedding, per layer rms_norm, the
q/k/v linears, rope at the cached lengths, kv_append into the caller's
caches, decode_attention over them, the output linear with its residual,
rms_norm and a SwiGLU MLP (gate, up, silu_mul, down with its residual);
then the last position's rms_norm, lm_head logits and argmax.

    llama_ir.py -o llama.kg                      (issue-size defaults)
    llama_ir.py --layers 3 --hidden 32 --heads 4 --kv-heads 2 --ffn 48 \\
        --vocab 40 --lmax 16 --caches f32,i8,bf16 --scale1 0.25 -o t.kg

--caches gives each layer's cache dtype in turn (cycled): f32, bf16, f16,
or i8 with per-row f32 scales (inputs k_scale.N / v_scale.N). The caches,
k_lens and the token ids are graph inputs; B and L are symbolic.
--scale1 S gives layer 1's decode_attention an explicit scale (a test
of the attribute). Python 3 standard library only."""
import argparse
import sys


def llama_ir(layers, hidden, heads, kv_heads, ffn, vocab, lmax, caches, scale1=None,
             comment=None):
    D = hidden // heads
    o = ['kern-graph 1'] + ['# ' + c for c in (comment or [])]
    o += ['dim B', 'dim L', 'input ids i64 [B,L]', 'input k_lens i64 [B]',
          'weight embed f32 [%d,%d]' % (vocab, hidden), 'weight rope.table f32 [%d,%d]' % (lmax, D)]
    for i in range(layers):
        c = caches[i % len(caches)]
        o.append('input k_cache.%d %s [B,%d,%d,%d]' % (i, c, lmax, kv_heads, D))
        o.append('input v_cache.%d %s [B,%d,%d,%d]' % (i, c, lmax, kv_heads, D))
        if c == 'i8':
            o.append('input k_scale.%d f32 [B,%d,%d]' % (i, lmax, kv_heads))
            o.append('input v_scale.%d f32 [B,%d,%d]' % (i, lmax, kv_heads))
        for w, sh in (('ln1', [hidden]), ('q', [heads * D, hidden]), ('k', [kv_heads * D, hidden]),
                      ('v', [kv_heads * D, hidden]), ('o', [hidden, heads * D]), ('ln2', [hidden]),
                      ('gate', [ffn, hidden]), ('up', [ffn, hidden]), ('down', [hidden, ffn])):
            o.append('weight l%d.%s.w f32 [%s]' % (i, w, ','.join(map(str, sh))))
    o += ['weight norm f32 [%d]' % hidden, 'weight lm_head f32 [%d,%d]' % (vocab, hidden),
          'h = embedding(ids, embed)']
    x = 'h'
    for i in range(layers):
        c = caches[i % len(caches)]
        f = dict(p='l%d.' % i, x=x, i=i, hq=heads, hk=kv_heads, d=D, n=heads * D,
                 sc=', k_scale.%d, v_scale.%d' % (i, i) if c == 'i8' else '',
                 s=' scale=%s' % scale1 if i == 1 and scale1 else '')
        for line in ('{p}ln1 = rms_norm({x}, {p}ln1.w) eps=1e-06',
                     '{p}q = linear({p}ln1, {p}q.w)',
                     '{p}k = linear({p}ln1, {p}k.w)',
                     '{p}v = linear({p}ln1, {p}v.w)',
                     '{p}q4 = reshape({p}q) shape=B,L,{hq},{d}',
                     '{p}k4 = reshape({p}k) shape=B,L,{hk},{d}',
                     '{p}v4 = reshape({p}v) shape=B,L,{hk},{d}',
                     '{p}qr = rope({p}q4, rope.table, k_lens)',
                     '{p}kr = rope({p}k4, rope.table, k_lens)',
                     '{p}kv = kv_append({p}kr, {p}v4, k_cache.{i}, v_cache.{i}, k_lens{sc})',
                     '{p}attn = decode_attention({p}qr, k_cache.{i}, v_cache.{i}, {p}kv{sc}){s}',
                     '{p}a3 = reshape({p}attn) shape=B,L,{n}',
                     '{p}o = linear({p}a3, {p}o.w, -, {x})',
                     '{p}ln2 = rms_norm({p}o, {p}ln2.w) eps=1e-06',
                     '{p}gate = linear({p}ln2, {p}gate.w)',
                     '{p}up = linear({p}ln2, {p}up.w)',
                     '{p}swiglu = silu_mul({p}gate, {p}up)',
                     '{p}down = linear({p}swiglu, {p}down.w, -, {p}o)'):
            o.append(line.format(**f))
        x = 'l%d.down' % i
    o += ['last = slice(%s) axis=1 start=L-1 length=1' % x, 'fn = rms_norm(last, norm) eps=1e-06',
          'logits = linear(fn, lm_head)', 'next = argmax(logits)',
          'output logits', 'output next', 'output l%d.kv' % (layers - 1)]
    return '\n'.join(o) + '\n'


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--layers', type=int, default=8)
    ap.add_argument('--hidden', type=int, default=2048)
    ap.add_argument('--heads', type=int, default=16)
    ap.add_argument('--kv-heads', type=int, default=4)
    ap.add_argument('--ffn', type=int, default=5632)
    ap.add_argument('--vocab', type=int, default=32000)
    ap.add_argument('--lmax', type=int, default=4160, help='cache rows (and rope positions)')
    ap.add_argument('--caches', default='f32', help='cache dtypes per layer, cycled')
    ap.add_argument('--scale1', default=None)
    ap.add_argument('-o', '--output', required=True)
    a = ap.parse_args(argv)
    caches = a.caches.split(',')
    bad = [c for c in caches if c not in ('f32', 'bf16', 'f16', 'i8')]
    if bad or a.hidden % a.heads or a.heads % a.kv_heads or (a.hidden // a.heads) % 2:
        sys.stderr.write('llama_ir.py: bad config (caches %s, hidden %d, heads %d/%d)\n' % (
            a.caches, a.hidden, a.heads, a.kv_heads))
        return 2
    args = [x for x in (argv if argv is not None else sys.argv[1:])]
    if '-o' in args:
        del args[args.index('-o'):args.index('-o') + 2]
    text = llama_ir(a.layers, a.hidden, a.heads, a.kv_heads, a.ffn, a.vocab, a.lmax, caches,
                    a.scale1, ['gen/llama_ir.py ' + ' '.join(args)])
    with open(a.output, 'w') as f:
        f.write(text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
