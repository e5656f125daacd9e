# Usage: split_plans.py AUTO.json EVEN.json ACCOUNTED.json: the
# accounted plans of an auto search, its even plans priced as the even
# search prices them, and an accounted search of accounted plans only.
import json
import sys

auto, even, accounted = (json.load(open(path))["plans"] for path in sys.argv[1:])
labels = []
for plan in auto:
    if "pipeline_split" in plan:
        assert " split=%s " % plan["pipeline_split"] in plan["plan"], plan
        if plan["cp"] == 1 and plan["sequence_parallel"]:
            labels.append(plan["plan"])
for label in sorted(labels):
    print("accounted in auto:", label)
assert all("pipeline_split" not in plan for plan in even)
fields = ("step_micros", "memory", "status", "mfu")
priced = {plan["plan"]: [plan[key] for key in fields] for plan in even}
for plan in auto:
    if "pipeline_split" not in plan:
        assert priced.pop(plan["plan"]) == [plan[key] for key in fields], plan
assert not priced, priced
print("even plans priced alike")
assert accounted and all(
    "pipeline_split" in plan or plan["pp"] == 1 for plan in accounted)
