#!/usr/bin/env python3
"""op_table_check.py -- gen/kern_gen.py's op table against the executor's:
every op of include/kern_graph.h's kern__gops with its input slots (OPS)
and the attributes it takes (OP_ATTRS), read from the header's text. The
generator reads the IR the executor reads, so an op, slot or attribute
that one takes and the other refuses is a failure (make test, through
tests/gen_check.sh). --print writes the OP_ATTRS table the header implies."""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'gen'))
import kern_gen  # noqa: E402


def c_tables():
    with open(os.path.join(ROOT, 'include', 'kern_graph.h')) as f:
        h = f.read()
    enum = re.search(r'enum\s*\{\s*(KERN__GA_ACT[^}]*)\}', h).group(1)
    ga = [e.strip() for e in enum.split(',') if e.strip()]
    ga = [e.split('=')[0].strip()[len('KERN__GA_'):] for e in ga if e.strip() != 'KERN__GA_COUNT']
    body = re.search(r'kern__gattrs\[KERN__GA_COUNT\]\s*=\s*\{(.*?)\};', h, re.S).group(1)
    names = re.findall(r'\{"(\w+)",', body)
    if len(names) != len(ga):
        sys.exit('op_table_check: %d attribute names for %d KERN__GA_ enums' % (len(names), len(ga)))
    byenum = dict(zip(ga, names))
    macros = {}
    for m in re.finditer(r'#define (KERN__GA_(?:GEMM|SDPA))\s*\\?\s*\(([^)]*(?:\)[^)]*)*?)\)\n', h):
        macros[m.group(1)] = m.group(2)

    def attrs(expr):
        expr = expr.strip()
        out = set()
        for tok in re.findall(r'KERN__GAF\((\w+)\)|(KERN__GA_(?:GEMM|SDPA))', expr):
            if tok[0]:
                out.add(byenum[tok[0]])
            else:
                out |= attrs(macros[tok[1]])
        return out
    table = re.search(r'kern__gops\[KERN_GRAPH_OP_COUNT\]\s*=\s*\{(.*?)\}\};', h, re.S).group(1) + '}'
    ops = {}
    for m in re.finditer(r'/\* (\w+) \*/\s*\{"([^"]*)",\s*([^,]+),\s*([^,]+),\s*([^,]+),\s*([^,]+),\s*([^,]+),'
                         r'\s*([^,]+?),\s*(\w+)\}', table):
        ops[m.group(1).lower()] = (m.group(2), attrs(m.group(8)))
    return ops


def main():
    ops = c_tables()
    if '--print' in sys.argv:
        for op in sorted(ops):
            print("    '%s': {%s}," % (op, ', '.join("'%s'" % a for a in sorted(ops[op][1]))))
        return 0
    bad = []
    for op, (slots, attrs) in sorted(ops.items()):
        if op not in kern_gen.OPS:
            bad.append("op '%s': the executor's, not the generator's" % op)
            continue
        if kern_gen.OPS[op] != slots:
            bad.append("op '%s': slots '%s' here, '%s' in the executor" % (op, kern_gen.OPS[op], slots))
        mine = kern_gen.OP_ATTRS.get(op, set())
        if mine != attrs:
            bad.append("op '%s': attributes %s here, %s in the executor" % (op, sorted(mine), sorted(attrs)))
    for op in kern_gen.OPS:
        if op not in ops:
            bad.append("op '%s': the generator's, not the executor's" % op)
    for b in bad:
        print('op_table_check: ' + b)
    print('op_table_check: %d ops compared, %d differences' % (len(ops), len(bad)))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
