"""Compares a search with bound pruning (ON) against the same search
without (OFF): the plans ON lists are OFF's, row for row but the rank; OFF
lists more; ON's best plans are OFF's; ON counts what it left out."""
import json
import sys

on = json.load(open(sys.argv[1]))
off = json.load(open(sys.argv[2]))
rows = {plan["plan"]: plan for plan in off["plans"]}


def without_rank(plan):
    return {key: value for key, value in plan.items() if key != "rank"}


same = all(without_rank(plan) == without_rank(rows[plan["plan"]])
           for plan in on["plans"])
print("kept rows same:", same)
print("off lists more:", len(off["plans"]) > len(on["plans"]))
print("off has no bounds:", "pruned_by_bounds" not in off)
counts = on["pruned_by_bounds"]
print("left out counted:",
      len(off["plans"]) - len(on["plans"]) == sum(counts.values()))
best = [plan["plan"] for plan in off["plans"] if plan["rank"]][:3]
print("best same:",
      best == [plan["plan"] for plan in on["plans"] if plan["rank"]][:3])
