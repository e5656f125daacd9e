#!/usr/bin/env python3
# Usage: same_step.py PLANS.json DIR: each DIR/rank-K/*.manifest.json has
# the plan of rank K and its step estimate, to the microsecond.
import glob
import json
import sys

plans = json.load(open(sys.argv[1]))["plans"]
checked = 0
for plan in plans:
    if plan["rank"] is None:
        continue
    found = glob.glob("%s/rank-%d/*.manifest.json" % (sys.argv[2], plan["rank"]))
    if not found:
        continue
    manifest = json.load(open(found[0]))
    assert manifest["options"]["plan"] == plan["plan"], manifest["options"]
    step = manifest["step_estimate"]["step_micros"]
    assert abs(step - plan["step_micros"]) <= 1, (step, plan["step_micros"])
    checked += 1
assert checked, "no rank-K directory"
print("%d plans as searched" % checked)
