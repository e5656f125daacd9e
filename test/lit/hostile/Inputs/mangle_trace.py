"""Damages a Chakra .et file in ways that still decode up to a point.

  mangle_trace.py cut TRACE           cut TRACE after its second-to-last
                                      message, exactly at a node boundary
  mangle_trace.py bomb TRACE OUT MB   write OUT (gzip): TRACE's metadata and
                                      MB megabytes of zero bytes
"""
import gzip
import sys


def message_ends(data):
    """The offset after each varint32-length-prefixed message."""
    ends, pos = [], 0
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
    return ends


def main():
    action, trace = sys.argv[1], sys.argv[2]
    data = open(trace, "rb").read()
    ends = message_ends(data)
    if action == "cut":
        open(trace, "wb").write(data[:ends[-2]])
    elif action == "bomb":
        out, megabytes = sys.argv[3], int(sys.argv[4])
        with gzip.open(out, "wb", compresslevel=9) as f:
            f.write(data[:ends[0]])
            zeros = bytes(1 << 20)
            for _ in range(megabytes):
                f.write(zeros)
    else:
        sys.exit("unknown action " + action)


if __name__ == "__main__":
    main()
