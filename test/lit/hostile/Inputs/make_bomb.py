"""Writes OUT.gz: the GlobalMetadata of TRACE followed by MB megabytes of
zero bytes, gzipped (a small file that inflates to much more)."""
import gzip
import sys

trace, out, megabytes = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = open(trace, "rb").read()
pos, length, shift = 0, 0, 0
while True:
    byte = data[pos]
    pos += 1
    length |= (byte & 0x7F) << shift
    shift += 7
    if not byte & 0x80:
        break
with gzip.open(out, "wb", compresslevel=9) as f:
    f.write(data[:pos + length])
    zeros = bytes(1 << 20)
    for _ in range(megabytes):
        f.write(zeros)
