"""The bf16 graphs' casts (models/bert.py, models/sam.py): autocast's
placement written into kern's text IR."""


def casts(w, mode):
    """low(x) and high(x) for an IR being written with w: in mode "bf16"
    they write a cast of value x to bf16 / f32 and return the new name;
    in any other mode they return x (no node)."""
    def low(x):
        if mode != "bf16":
            return x
        w("%s.b = cast(%s) dtype=bf16" % (x, x))
        return x + ".b"

    def high(x):
        if mode != "bf16":
            return x
        w("%s.f = cast(%s) dtype=f32" % (x, x))
        return x + ".f"

    return low, high
