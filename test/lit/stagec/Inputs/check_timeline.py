#!/usr/bin/env python3
#===- check_timeline.py - Check a --timeline against its trace set -------===#
#
# Usage: check_timeline.py TIMELINE.json MANIFEST.json
#
# The timeline must be the estimate of the trace set the manifest describes:
# a process per stage named with its stage and rank; per stage as many node
# runs as the stage's rank class has nodes, each node once; each run on the
# thread of its kind (compute 0, collectives 1 or 2, sends 3, receives 4),
# one at a time per thread; a flow from each send to a receive; and the last
# run ending at the manifest's step time. Prints a summary line; prints why
# and exits 1 at the first problem.
#
#===----------------------------------------------------------------------===#

import json
import sys
from collections import defaultdict

THREADS = {"compute": (0,), "collective": (1, 2), "send": (3,), "recv": (4,)}


def fail(message):
    print(f"check_timeline: {message}")
    sys.exit(1)


def main(timeline_path, manifest_path):
    with open(timeline_path, encoding="utf-8") as stream:
        timeline = json.load(stream)
    with open(manifest_path, encoding="utf-8") as stream:
        manifest = json.load(stream)
    other = timeline["otherData"]
    if other["kind"] != "stagec-timeline":
        fail(f"kind is {other['kind']}")
    step = manifest["step_estimate"]["step_micros"]
    # The manifest rounds to a microsecond.
    if abs(other["step_micros"] - step) > 1:
        fail(f"step {other['step_micros']} us, the manifest's {step} us")

    nodes = {}
    for rank_class in manifest["rank_classes"]:
        nodes.setdefault(rank_class["stage"],
                         sum(rank_class["nodes"].values()))
    names, runs, busy = {}, defaultdict(set), defaultdict(list)
    flows = defaultdict(list)
    last_end = 0
    for event in timeline["traceEvents"]:
        pid = event["pid"]
        if event["ph"] == "M" and event["name"] == "process_name":
            names[pid] = event["args"]["name"]
        elif event["ph"] == "X":
            node = event["args"]["node"]
            if node in runs[pid]:
                fail(f"stage {pid}: node {node} runs twice")
            runs[pid].add(node)
            if event["tid"] not in THREADS[event["cat"]]:
                fail(f"stage {pid}: a {event['cat']} node on thread "
                     f"{event['tid']}")
            if event["dur"] < 0:
                fail(f"stage {pid}: node {node} has a negative duration")
            end = event["ts"] + event["dur"]
            last_end = max(last_end, end)
            if event["tid"] != 4:
                busy[(pid, event["tid"])].append((event["ts"], end, node))
        elif event["ph"] in ("s", "f"):
            flows[event["id"]].append((event["ph"], event["tid"]))
    for pid, count in nodes.items():
        if not names.get(pid, "").startswith(f"stage {pid} (rank "):
            fail(f"process {pid} is named {names.get(pid)!r}")
        if len(runs[pid]) != count:
            fail(f"stage {pid}: {len(runs[pid])} node runs for {count} nodes")
    for (pid, tid), intervals in busy.items():
        intervals.sort()
        for (_, end, node), (start, _, next_node) in zip(intervals,
                                                         intervals[1:]):
            if start < end - 1e-6:
                fail(f"stage {pid} thread {tid}: node {next_node} starts "
                     f"before node {node} ends")
    for flow, ends in flows.items():
        if sorted(ends) != [("f", 4), ("s", 3)]:
            fail(f"flow {flow} is {ends}, not a send's start and a "
                 "receive's end")
    if abs(last_end - other["step_micros"]) > 1e-6 * other["step_micros"]:
        fail(f"the last run ends at {last_end} us, the step at "
             f"{other['step_micros']} us")
    print(f"stages {len(nodes)}, node runs {sum(map(len, runs.values()))}, "
          f"messages {len(flows)}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        fail("usage: check_timeline.py TIMELINE.json MANIFEST.json")
    main(sys.argv[1], sys.argv[2])
