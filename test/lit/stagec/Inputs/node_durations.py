#!/usr/bin/env python3
#===- node_durations.py - A timeline's compute nodes and their times -----===#
#
# Usage: node_durations.py TIMELINE.json
#
# Prints each compute node of the first stage as "name: microseconds", in
# the order they run, then their sum.
#
#===----------------------------------------------------------------------===#

import json
import sys


def main(path):
    with open(path, encoding="utf-8") as stream:
        events = json.load(stream)
    if isinstance(events, dict):
        events = events["traceEvents"]
    runs = sorted((event["ts"], event["name"], event["dur"])
                  for event in events
                  if event.get("ph") == "X" and event.get("pid") == 0 and
                  event.get("cat") == "compute")
    for _, name, micros in runs:
        print(f"{name}: {micros}")
    print(f"sum: {sum(micros for _, _, micros in runs)}")


if __name__ == "__main__":
    main(sys.argv[1])
