#!/usr/bin/env python3
"""bert_ir.py -- writes the text IR (docs/graph.md) of a BERT encoder with
Hugging Face parameter names, as a model script would: linears with bias,
heads split and merged by reshape/permute, residual adds and LayerNorms
written out (the executor's and kern_gen.py's passes fuse them).

    bert_ir.py --layers 12 --hidden 768 --heads 12 --inter 3072 -o bert_base.kg
    bert_ir.py --dtype bf16 ... -o bert_base_bf16.kg

--dtype bf16 writes the graph as torch.autocast(bfloat16) runs it (the
placement of models/bert.py): the encoder's linears and attention in bf16
(bf16 weights and biases, activations cast to bf16 before them, the mask
cast once), embeddings, residual adds and LayerNorms in f32.

Python 3 standard library only. Weights come from safetensors (or random)."""
import argparse
import sys


def bert_ir(layers, hidden, heads, inter, vocab, max_pos, types, dtype='f32'):
    D = hidden // heads
    bf = dtype == 'bf16'
    lo = 'bf16' if bf else 'f32'
    o = ['kern-graph 1', 'dim B', 'dim L',
         'input input_ids i64 [B,L]', 'input token_type_ids i64 [B,L]',
         'input attention_mask f32 [B,1,1,L]']
    w = o.append
    e = 'embeddings.'
    w('weight %sword_embeddings.weight f32 [%d,%d]' % (e, vocab, hidden))
    w('weight %sposition_embeddings.weight f32 [%d,%d]' % (e, max_pos, hidden))
    w('weight %stoken_type_embeddings.weight f32 [%d,%d]' % (e, types, hidden))
    w('weight %sLayerNorm.weight f32 [%d]' % (e, hidden))
    w('weight %sLayerNorm.bias f32 [%d]' % (e, hidden))
    w('emb.word = embedding(input_ids, %sword_embeddings.weight)' % e)
    w('emb.pos = slice(%sposition_embeddings.weight) length=L' % e)
    w('emb.type = embedding(token_type_ids, %stoken_type_embeddings.weight)' % e)
    w('emb.sum1 = add(emb.word, emb.pos)')
    w('emb.sum2 = add(emb.sum1, emb.type)')
    w('emb.ln = layer_norm(emb.sum2, %sLayerNorm.weight, %sLayerNorm.bias) eps=1e-12' % (e, e))
    x = 'emb.ln'
    mask = 'attention_mask'
    if bf:
        w('mask.b = cast(attention_mask) dtype=bf16')
        mask = 'mask.b'

    def low(v):  # autocast: the activation cast to bf16 before a linear
        if not bf:
            return v
        w('%s.b = cast(%s) dtype=bf16' % (v, v))
        return v + '.b'

    def high(v):  # and back to f32 for the residual add
        if not bf:
            return v
        w('%s.f = cast(%s) dtype=f32' % (v, v))
        return v + '.f'
    for i in range(layers):
        p = 'encoder.layer.%d.' % i
        t = 'l%d.' % i

        def lin(out, inp, mod, n_out, n_in):
            w('weight %s%s.weight %s [%d,%d]' % (p, mod, lo, n_out, n_in))
            w('weight %s%s.bias %s [%d]' % (p, mod, lo, n_out))
            w('%s = linear(%s, %s%s.weight, %s%s.bias)' % (out, inp, p, mod, p, mod))
        xl = low(x)
        for q in ('query', 'key', 'value'):
            lin(t + q, xl, 'attention.self.' + q, hidden, hidden)
            w('%s%s.4d = reshape(%s%s) shape=B,L,%d,%d' % (t, q, t, q, heads, D))
            w('%s%s.heads = permute(%s%s.4d) perm=0,2,1,3' % (t, q, t, q))
        w('%sattn = sdpa(%squery.heads, %skey.heads, %svalue.heads, %s)' % (t, t, t, t, mask))
        w('%sattn.t = permute(%sattn) perm=0,2,1,3' % (t, t))
        w('%sattn.flat = reshape(%sattn.t) shape=B,L,%d' % (t, t, hidden))
        lin(t + 'attn.out', t + 'attn.flat', 'attention.output.dense', hidden, hidden)
        w('%sattn.res = add(%s, %s)' % (t, high(t + 'attn.out'), x))
        w('weight %sattention.output.LayerNorm.weight f32 [%d]' % (p, hidden))
        w('weight %sattention.output.LayerNorm.bias f32 [%d]' % (p, hidden))
        w('%sln1 = layer_norm(%sattn.res, %sattention.output.LayerNorm.weight, '
          '%sattention.output.LayerNorm.bias) eps=1e-12' % (t, t, p, p))
        lin(t + 'inter', low(t + 'ln1'), 'intermediate.dense', inter, hidden)
        w('%sgelu = gelu(%sinter)' % (t, t))
        lin(t + 'out', t + 'gelu', 'output.dense', hidden, inter)
        w('%sout.res = add(%s, %sln1)' % (t, high(t + 'out'), t))
        w('weight %soutput.LayerNorm.weight f32 [%d]' % (p, hidden))
        w('weight %soutput.LayerNorm.bias f32 [%d]' % (p, hidden))
        w('%sln2 = layer_norm(%sout.res, %soutput.LayerNorm.weight, %soutput.LayerNorm.bias) '
          'eps=1e-12' % (t, t, p, p))
        x = t + 'ln2'
    w('output %s' % x)
    return '\n'.join(o) + '\n'


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--layers', type=int, default=12)
    ap.add_argument('--hidden', type=int, default=768)
    ap.add_argument('--heads', type=int, default=12)
    ap.add_argument('--inter', type=int, default=3072)
    ap.add_argument('--vocab', type=int, default=30522)
    ap.add_argument('--max-pos', type=int, default=512)
    ap.add_argument('--types', type=int, default=2)
    ap.add_argument('--dtype', default='f32', choices=['f32', 'bf16'],
                    help='bf16: the encoder as torch.autocast(bfloat16) runs it')
    ap.add_argument('-o', '--out', required=True)
    a = ap.parse_args()
    if a.hidden % a.heads:
        sys.stderr.write('bert_ir.py: --hidden must be a multiple of --heads\n')
        return 2
    with open(a.out, 'w') as f:
        f.write(bert_ir(a.layers, a.hidden, a.heads, a.inter, a.vocab, a.max_pos, a.types, a.dtype))
    return 0


if __name__ == '__main__':
    sys.exit(main())
