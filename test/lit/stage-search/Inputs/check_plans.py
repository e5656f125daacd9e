#!/usr/bin/env python3
#===- check_plans.py - What stage-search promises of its files -------------===#
#
# Usage: check_plans.py PLANS.json PLANS.csv
#
# Checks plans.json and plans.csv against each other and against the
# search's promises: labels unique, fitting plans ranked 1..n by step time
# and within the memory limit, the others over it or failed with a reason,
# the micro-batches adding up to the global batch, one CSV row per plan.
# Prints the counts and the best plan for FileCheck.
#
#===------------------------------------------------------------------------===#

import csv
import json
import sys


def main():
    table = json.load(open(sys.argv[1]))
    rows = list(csv.DictReader(open(sys.argv[2])))
    plans = table["plans"]
    limit = table["memory_limit_bytes"]
    assert len(rows) == len(plans), (len(rows), len(plans))
    assert len({p["plan"] for p in plans}) == len(plans), "labels repeat"
    fits = [p for p in plans if p["status"] == "fits"]
    assert [p["rank"] for p in fits] == list(range(1, len(fits) + 1))
    assert plans[:len(fits)] == fits, "fitting plans come first"
    steps = [p["step_micros"] for p in fits]
    assert steps == sorted(steps), "ranked by step time"
    for plan, row in zip(plans, rows):
        assert row["plan"] == plan["plan"] and row["status"] == plan["status"]
        if plan["status"] == "failed":
            assert plan["reason"] and plan["step_micros"] is None
            continue
        total = plan["memory"]["total"]
        parts = sum(v for k, v in plan["memory"].items() if k != "total")
        assert total == parts, plan["plan"]
        assert (total <= limit) == (plan["status"] == "fits"), plan["plan"]
        assert plan["step_micros"] > 0 and 0 < plan["mfu"] < 1, plan["plan"]
        assert 0 <= plan["bubble_fraction"] <= 1, plan["plan"]
        gpus = plan["dp"] * plan["tp"] * plan["pp"] * plan["cp"] * plan["ep"]
        assert gpus == table["gpus"], plan["plan"]
        assert (plan["micro_batch"] * plan["microbatches"] * plan["dp"] *
                plan["ep"] == table["global_batch"]), plan["plan"]
        assert abs(float(row["step_s"]) - plan["step_micros"] / 1e6) < 1e-6
    print("plans %d fits %d" % (len(plans), len(fits)))
    if fits:
        print("best %s" % fits[0]["plan"])


if __name__ == "__main__":
    main()
