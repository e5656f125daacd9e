#!/usr/bin/env python3
# Usage: cp_exchange_plans.py ALL.json RING.json: the plans of a search over
# the three context-parallel exchanges (ALL) against one over the ring alone.
import json
import sys

every = json.load(open(sys.argv[1]))["plans"]
ring = json.load(open(sys.argv[2]))["plans"]
kinds = {}
for plan in every:
    kinds.setdefault(plan.get("cp_comm_type", "p2p"), []).append(plan)
print("kinds:", ", ".join("%s %d" % (k, len(v)) for k, v in sorted(kinds.items())))
# Only plans with cp > 1 try the other two, each labelled with it.
print("non-ring plans have cp > 1:", all(
    p["cp"] > 1 and (" cp=" + p["cp_comm_type"]) in p["plan"]
    for k in ("all_gather", "a2a") for p in kinds.get(k, [])))
# The ring plans are those (and priced as) the ring-only search's.
mine = {p["plan"]: p["step_micros"] for p in kinds["p2p"]}
theirs = {p["plan"]: p["step_micros"] for p in ring}
print("ring plans as searched alone:", mine == theirs)
