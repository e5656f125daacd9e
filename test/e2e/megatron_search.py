#!/usr/bin/env python3
#===- megatron_search.py - Where Megatron-LM's 2021 plans rank -------------===#
#
# Usage: megatron_search.py STAGE_SEARCH TEMPLATES TABLE_CSV [-j N]
#
# For each run of Narayanan et al. 2021, Table 1 (the shared CSV), searches
# the plans of the same model on the same GPUs with the same global batch,
# on `dgx-a100`, in the space that paper searched: tensor, pipeline and
# data parallelism (no context or expert parallelism), any micro-batch size
# and interleaving, even pipeline splits (2021's Megatron-LM counted no
# embedding or loss as a layer), full recomputation, no weight sharding, no sequence
# parallelism, gradients reduced after the backward pass, fp16, and the
# attention of 2021 (as megatron_table1.py compiles it). Prints a Markdown
# table (docs/search.md): the paper's plan's rank among the plans that fit,
# its step time, the best plan found and the gap between them. Exits 1 if
# the paper's plan is missing from a search's table, 77 without the CSV.
#
#===------------------------------------------------------------------------===#

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from megatron_table1 import make_2021_templates, read_run, rows  # noqa: E402


def main():
    search, templates, table = sys.argv[1:4]
    jobs = sys.argv[sys.argv.index("-j") + 1] if "-j" in sys.argv else "0"
    if not os.path.exists(table):
        print("skipped: no " + table)
        return 77
    scratch = tempfile.mkdtemp(prefix="megatron-search-")
    templates = make_2021_templates(templates, scratch)
    print("| model | GPUs | plans compiled (fit) | paper's plan | its rank | "
          "its step (s) | best plan found | best step (s) | paper / best |")
    print("|---|---|---|---|---|---|---|---|---|")
    missing = 0
    for row in rows(table):
        run = read_run(row)
        gpus, batch = run["gpus"], run["batch"]
        paper = "dp%d tp%d pp%d mb%dx%d v%d rc=full ws=none" % (
            run["dp"], run["tp"], run["pp"], run["micro"],
            batch // (run["dp"] * run["micro"]), run["chunks"])
        out = os.path.join(scratch, row["name"])
        command = [search, os.path.join(templates, "gpt.stg"), "-I", templates,
                   "--set", "S=2048", "--set", "V=51200",
                   "--set", "D=" + row["hidden"], "--set", "NH=" + row["heads"],
                   "--set", "L=" + row["layers"], "--dtype", "fp16",
                   "--gpus", str(gpus), "--system", "dgx-a100",
                   "--global-batch", str(batch), "--cp", "1", "--ep", "1",
                   "--recompute", "full", "--weight-sharding", "none",
                   "--sequence-parallel", "off", "--tp-placement", "node",
                   "--grad-reduce", "after-backward",
                   "--pipeline-split", "even", "-q", "-j", jobs,
                   "-o", out]
        result = subprocess.run(command, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        if result.returncode != 0:
            sys.stderr.write(result.stdout[-2000:])
            missing += 1
            continue
        plans = json.load(open(os.path.join(out, "plans.json")))["plans"]
        fits = [plan for plan in plans if plan["status"] == "fits"]
        found = [plan for plan in plans if plan["plan"] == paper]
        if not found or not fits:
            missing += 1
            print("| %s | %d | %d (%d) | %s | not in the table | | | | |" %
                  (row["name"], gpus, len(plans), len(fits), paper))
            continue
        plan, best = found[0], fits[0]
        rank = str(plan["rank"]) if plan["rank"] else plan["status"]
        print("| %s | %d | %d (%d) | %s | %s | %.2f | %s | %.2f | %+.1f %% |" %
              (row["name"], gpus, len(plans), len(fits), paper, rank,
               plan["step_micros"] / 1e6, best["plan"],
               best["step_micros"] / 1e6,
               100 * (plan["step_micros"] / best["step_micros"] - 1)))
        sys.stdout.flush()
    shutil.rmtree(scratch, ignore_errors=True)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
