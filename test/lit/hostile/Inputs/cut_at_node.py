"""Cuts a Chakra .et file after its second-to-last message, exactly at a
node boundary, so that what is left still decodes."""
import sys

path = sys.argv[1]
data = open(path, "rb").read()
ends = []
pos = 0
while pos < len(data):
    length, shift = 0, 0
    while True:
        byte = data[pos]
        pos += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    pos += length
    ends.append(pos)
open(path, "wb").write(data[:ends[-2]])
