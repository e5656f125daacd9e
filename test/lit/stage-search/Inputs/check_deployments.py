#!/usr/bin/env python3
#===- check_deployments.py - What stage-search --serve promises ------------===#
#
# Usage: check_deployments.py DIR STAGEC MODEL [STAGEC-FLAG...]
#
# Checks DIR/deployments.json and DIR/deployments.csv against each other and
# against the search's promises: the runs that meet the SLOs first, ranked
# 1..n by tokens/s per GPU, within the SLOs (the others not, with a
# reason); the Pareto front exactly the non-dominated runs that meet them;
# every deployment within the budget and leaving fewer GPUs idle than an
# instance takes; no larger cap after a cap of 64 or more that never bound;
# the counts.
# Then runs STAGEC MODEL with the `stagec` flags of the best run and of the
# best disaggregated run, of the best two-batch-overlapped one and of each
# router's best after the first (and the extra flags, such as -I or --set
# given to the search) and checks `stagec --mode serve` reports the same
# figures.
# Prints the counts, the best run and what stagec agreed on for FileCheck.
#
#===------------------------------------------------------------------------===#

import csv
import json
import os
import shlex
import subprocess
import sys
import tempfile


def statistic(latency, name):
    return latency[name]


def main():
    directory, stagec, model = sys.argv[1:4]
    table = json.load(open(os.path.join(directory, "deployments.json")))
    rows = list(csv.DictReader(open(os.path.join(directory,
                                                 "deployments.csv"))))
    runs = table["deployments"]
    assert table["generator"] == "stage-search" and table["search"] == "serve"
    assert len(rows) == len(runs), (len(rows), len(runs))
    budget = table["gpus"]
    def plan_key(plan, run):
        return (plan, run["precision"], run["two_batch_overlap"])

    plans = {plan_key(p["plan"], p): p for p in table["instance_plans"]}

    meets = [r for r in runs if r["status"] == "meets"]
    assert runs[:len(meets)] == meets, "the runs that meet come first"
    assert [r["rank"] for r in meets] == list(range(1, len(meets) + 1))
    keys = [(r["output_tokens_per_s_per_gpu"],
             r["output_tokens_per_s_per_user"]) for r in meets]
    assert keys == sorted(keys, reverse=True), "ranked by tokens/s per GPU"
    statuses = [r["status"] for r in runs]
    assert statuses == sorted(statuses, key=["meets", "misses",
                                             "failed"].index)

    slo = table["slo"]
    for run, row in zip(runs, rows):
        where = run["deployment"]
        for key in ("status", "deployment", "kind", "precision", "plan",
                    "router"):
            assert row[key] == str(run[key]), (key, row[key], run[key])
        # The run's router is one searched, and its command says it.
        assert run["router"] in table["engine"]["routers"], where
        assert (("--router " + run["router"]) in run["stagec"]) == (
            run["router"] != "load"), (where, run["stagec"])
        assert row["two_batch_overlap"] == (
            "true" if run["two_batch_overlap"] else "false")
        assert run["two_batch_overlap"] == ("tbo" in where.split()), where
        assert row["pareto"] == ("true" if run["pareto"] else "false")
        assert row["rank"] == str(run.get("rank", ""))
        assert row["max_batch"] == str(run["max_batch"])
        # The deployment: within the budget, nothing more fits.
        serve = plans[plan_key(run["plan"], run)]
        assert serve["status"] == "fits", where
        used = run["instances"] * serve["gpus"]
        sizes = [serve["gpus"]]
        if run["kind"] == "disaggregated":
            prefill = plans[plan_key(run["prefill_plan"], run)]
            assert prefill["status"] in ("fits", "prefill-only"), where
            used += run["prefill_instances"] * prefill["gpus"]
            sizes.append(prefill["gpus"])
            assert " -> " in where
        else:
            assert "prefill_plan" not in run
            assert run["instances"] == budget // serve["gpus"], where
        assert used == run["gpus"] <= budget, where
        assert budget - used < min(sizes), where
        if run["status"] == "failed":
            assert run["reason"] and "ttft_ms" not in run, where
            continue
        if "attainment" in slo:
            # Per-request SLOs: the share of requests within them.
            within = run["slo_attainment"] >= slo["attainment"]
            assert (run["status"] == "meets") == within, where
            assert within or "of requests within the SLOs" in run["reason"]
        else:
            # The SLOs, on the statistic they bound.
            missed = []
            if "max_ttft_ms" in slo and statistic(
                    run["ttft_ms"], slo["statistic"]) > slo["max_ttft_ms"]:
                missed.append("ttft")
            if "max_tpot_ms" in slo and statistic(
                    run["tpot_ms"], slo["statistic"]) > slo["max_tpot_ms"]:
                missed.append("tpot")
            assert (run["status"] == "misses") == bool(missed), where
            for name in missed:
                assert name in run["reason"], (where, run["reason"])
        assert run["output_tokens_per_s_per_gpu"] > 0, where
        assert abs(float(row["output_tokens_per_s_per_gpu"])
                   - run["output_tokens_per_s_per_gpu"]) < 1e-3

    # The front: the runs that meet, and that no such run beats in both
    # throughputs (at least as good in both, better in one).
    def beaten(run):
        a = (run["output_tokens_per_s_per_gpu"],
             run["output_tokens_per_s_per_user"])
        for other in meets:
            b = (other["output_tokens_per_s_per_gpu"],
                 other["output_tokens_per_s_per_user"])
            if b[0] >= a[0] and b[1] >= a[1] and b != a:
                return True
        return False
    for run in runs:
        expected = run["status"] == "meets" and not beaten(run)
        assert run["pareto"] == expected, run["deployment"]

    # A cap that never bound stands for every larger one of the same cost
    # model: from 64 up (below, the cap also sets the decode batch that
    # IterationCostModel samples).
    def point(run):
        return (run["deployment"], run["router"], run.get("concurrency"),
                run.get("request_rate"))
    for run in runs:
        if (run["status"] != "failed" and not run["max_batch_binding"]
                and run["max_batch"] >= 64):
            larger = [r for r in runs if point(r) == point(run)
                      and r["max_batch"] > run["max_batch"]]
            assert not larger, (run["deployment"], run["max_batch"])

    counts = table["counts"]
    assert counts["runs"] == len(runs)
    assert counts["meet"] == len(meets)
    assert counts["meet"] + counts["miss"] + counts["failed"] == len(runs)
    assert counts["pareto"] == sum(r["pareto"] for r in runs)
    assert counts["candidate_runs"] == (len(runs) + counts["repeated_runs"]
                                        + counts["skipped_runs"])
    print(f"runs {len(runs)} meet {len(meets)} front {counts['pareto']}")
    if meets:
        print(f"best {meets[0]['deployment']}")

    # stagec --mode serve gives the same figures for a run's flags.
    checked = []
    disaggregated = [r for r in runs if r["kind"] == "disaggregated"
                     and r["status"] != "failed"]
    overlapped = [r for r in runs if r["two_batch_overlap"]
                  and r["status"] != "failed"]
    # And the best run of each router after the first searched.
    routed = [next(r for r in runs if r["router"] == router
                   and r["status"] != "failed")
              for router in table["engine"]["routers"][1:]
              if any(r["router"] == router and r["status"] != "failed"
                     for r in runs)]
    for run in ([runs[0]] if runs[0]["status"] != "failed" else []) \
            + disaggregated[:1] + overlapped[:1] + routed:
        with tempfile.TemporaryDirectory() as scratch:
            report = os.path.join(scratch, "report.json")
            subprocess.run([stagec, model] + shlex.split(run["stagec"])
                           + sys.argv[4:] + ["--report-json", report],
                           check=True, stdout=subprocess.DEVNULL)
            serving = json.load(open(report))["serving"]
        for key in ("ttft_ms", "queue_ms", "tpot_ms", "e2e_latency_ms",
                    "output_tokens_per_s_per_gpu",
                    "output_tokens_per_s_per_user", "mean_batch",
                    "peak_kv_cache_used", "iterations"):
            assert serving[key] == run[key], (run["deployment"], key,
                                              serving[key], run[key])
        # Per-request SLOs: stagec counts the same requests within them.
        if "slo_attainment" in run:
            assert serving["slo"]["attainment"] == run["slo_attainment"], (
                run["deployment"], serving["slo"], run["slo_attainment"])
        # A run's requests are those sent; stagec's, those measured.
        assert (serving["requests"] + serving.get("warmup_requests", 0)
                == run["requests"]), run["deployment"]
        checked.append(run["kind"] + (" tbo" if run["two_batch_overlap"]
                                      else "")
                       + (" " + run["router"] if run in routed else ""))
    print("stagec agrees:", " ".join(checked))


if __name__ == "__main__":
    main()
