#!/usr/bin/env python3
"""embed.py IN OUT NAME: writes OUT, a C file defining `const char NAME[]`
with the bytes of IN (the build embeds the flame graph template)."""
import sys

src, out, name = sys.argv[1:4]
data = open(src, "rb").read()
with open(out, "w") as f:
    f.write(f"/* generated from {src.rsplit('/', 1)[-1]} by embed.py */\n")
    f.write(f"const char {name}[] = {{\n")
    for i in range(0, len(data), 16):
        f.write("\t" + ", ".join(f"0x{b:02x}" for b in data[i:i + 16]) + ",\n")
    f.write("\t0x00\n};\n")
