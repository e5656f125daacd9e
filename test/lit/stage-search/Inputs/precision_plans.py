"""Compares a search over bf16 and fp8 with the same search over bf16 alone
and with stagec: each fp8 plan's label ends in `fp8` and plans.json says
so; the bf16 plans price as they do without fp8 beside them; every fp8
plan is faster than its bf16 twin."""
import json
import sys

both, bf16_only = (json.load(open(path))["plans"] for path in sys.argv[1:3])
by_label = {plan["plan"]: plan for plan in both if "step_micros" in plan}
alone = {plan["plan"]: plan for plan in bf16_only if "step_micros" in plan}
fp8 = [label for label in by_label if label.endswith(" fp8")]
print("fp8 plans: %d, bf16 plans: %d" % (len(fp8), len(alone)))
print("fp8 marked in plans.json: %s" % all(
    by_label[label].get("precision") == "fp8" for label in fp8))
print("bf16 plans priced alike: %s" % all(
    by_label[label]["step_micros"] == plan["step_micros"] and "precision" not in plan
    for label, plan in alone.items()))
faster = [label for label in fp8 if label[:-4] in by_label and
          by_label[label]["step_micros"] < by_label[label[:-4]]["step_micros"]]
print("fp8 faster than its bf16 twin: %d of %d" % (len(faster), len(fp8)))
