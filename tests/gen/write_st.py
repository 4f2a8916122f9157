#!/usr/bin/env python3
"""write_st.py MODEL.kg BIND OUT.safetensors -- the graph's f32 weights in a
safetensors file (standard library only) for tests/gen_st_check.c: in
reverse graph order (so file order is not graph order), weight k element
i = ((7 i + 13 k) % 23 - 11) / 64 (exact in f32; the check computes the
same), the header padded with spaces to a multiple of 8."""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'gen'))
import kern_gen  # noqa: E402


def main():
    ir, bind, out = sys.argv[1:4]
    with open(ir) as f:
        g = kern_gen.parse_ir(f.read(), ir)
    low = kern_gen.Lowering(g, kern_gen.parse_bind(bind), 'st')
    hdr, blobs, off = {'__metadata__': {'format': 'pt'}}, [], 0
    for k in reversed(range(len(low.weights))):
        v = low.weights[k]
        if v.dtype != 'f32':
            sys.exit('write_st.py: %s is %s (f32 only)' % (v.name, v.dtype))
        n = v.numel()
        data = struct.pack('<%df' % n, *[((7 * i + 13 * k) % 23 - 11) / 64.0 for i in range(n)])
        hdr[v.name] = {'dtype': 'F32', 'shape': v.shape, 'data_offsets': [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(hdr, separators=(',', ':')).encode()
    h += b' ' * (-len(h) % 8)
    with open(out, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b''.join(blobs))


if __name__ == '__main__':
    main()
