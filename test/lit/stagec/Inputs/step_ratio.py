"""Prints whether the second report's estimated step is shorter than the
first's, and the ratio, for tests that compare two runs of one plan."""
import re
import sys


def step_seconds(path):
    text = open(path).read()
    value, unit = re.search(r"estimated step: ([0-9.]+) (us|ms|s)\b",
                            text).groups()
    return float(value) / {"us": 1e6, "ms": 1e3, "s": 1}[unit]


first, second = (step_seconds(path) for path in sys.argv[1:3])
print("second faster: %s" % ("yes" if second < first else "no"))
print("ratio: %.2f" % (first / second))
