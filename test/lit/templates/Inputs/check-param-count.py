#!/usr/bin/env python3
"""Checks the `// parameters: N` line of `stage-opt --print-param-count`.

Usage: stage-opt FILE --print-param-count | check-param-count.py PUBLISHED
Exits 1 unless exactly one count is printed, it is an integer, and it is
within 1% of PUBLISHED (a number such as 70.6e9). Prints both and the
relative difference either way, so a failing test shows how far off it is.
"""

import re
import sys


def main():
    published = float(sys.argv[1])
    tolerance = float(sys.argv[2]) if len(sys.argv) > 2 else 0.01
    counts = re.findall(r"^// parameters: (.*)$", sys.stdin.read(), re.M)
    if len(counts) != 1 or not counts[0].isdigit():
        print(f"expected one integer parameter count, found {counts}")
        return 1
    ours = int(counts[0])
    diff = (ours - published) / published
    print(f"parameters: {ours} published: {published:.6g} difference: {diff:+.3%}")
    return 0 if abs(diff) <= tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
