"""Compares the step estimates of two `stagec --report-json` documents.

Usage: compare_steps.py FIRST.json SECOND.json

Prints `shorter`, `longer` or `equal` for the first against the second,
with both step times in milliseconds, for FileCheck.
"""
import json
import sys


def step_micros(path):
    with open(path) as f:
        return json.load(f)["step_estimate"]["step_micros"]


first, second = step_micros(sys.argv[1]), step_micros(sys.argv[2])
verdict = ("shorter" if first < second else
           "longer" if first > second else "equal")
print("%s: %.2f ms against %.2f ms" % (verdict, first / 1e3, second / 1e3))
