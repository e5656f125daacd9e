"""Checks a `stagec --mode serve` report (--report-json) against itself.

Every key scripts depend on is there with mean, p50, p90 and p99 in order;
the throughputs follow from the counts and the duration; with --isl/--osl
given, a request that ran alone (--alone) spends its first token's time and
then osl - 1 decode steps: e2e = ttft + (osl - 1) x tpot. With --timeline,
the iteration events add up to the engines' busy time and their count.
Prints `ok:` and the figures FileCheck looks at.
"""
import argparse
import json
import math
import sys


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


parser = argparse.ArgumentParser()
parser.add_argument("report")
parser.add_argument("--osl", type=int)
parser.add_argument("--alone", action="store_true")
parser.add_argument("--timeline")
args = parser.parse_args()

report = json.load(open(args.report))
if report.get("kind") != "stagec-report":
    fail("not a stagec report")
serving = report["serving"]
for key in ("ttft_ms", "tpot_ms", "e2e_latency_ms"):
    summary = serving[key]
    values = [summary[name] for name in ("p50", "p90", "p99")]
    if values != sorted(values) or not all(math.isfinite(v) and v >= 0
                                           for v in values + [summary["mean"]]):
        fail(f"{key}: percentiles out of order or not finite: {summary}")
duration = serving["duration_s"]
gpus = serving["gpus"]
per_gpu = serving["output_tokens_per_s_per_gpu"]
if not math.isclose(per_gpu * gpus, serving["output_tokens_per_s"], rel_tol=1e-9):
    fail("output tokens/s per GPU times the GPUs is not the total")
if not math.isclose(serving["requests_per_s"] * duration, serving["requests"],
                    rel_tol=1e-9):
    fail("requests/s times the duration is not the requests")
if args.osl and not math.isclose(
        serving["output_tokens_per_s"] * duration,
        serving["requests"] * args.osl, rel_tol=1e-9):
    fail("output tokens do not add up to requests x osl")
if args.alone:
    ttft, tpot, e2e = (serving[k]["mean"] for k in
                       ("ttft_ms", "tpot_ms", "e2e_latency_ms"))
    if not math.isclose(e2e, ttft + (args.osl - 1) * tpot, rel_tol=1e-9):
        fail(f"e2e {e2e} is not ttft {ttft} + {args.osl - 1} x tpot {tpot}")
    if not math.isclose(serving["output_tokens_per_s_per_user"], 1e3 / tpot,
                        rel_tol=1e-9):
        fail("tokens/s per user is not 1 / tpot for one request at a time")
metrics = report["metrics"]
if (not math.isclose(metrics["ttft"], serving["ttft_ms"]["mean"] / 1e3, rel_tol=1e-9)
        or not math.isclose(metrics["tpot"], serving["tpot_ms"]["mean"] / 1e3, rel_tol=1e-9)
        or metrics["tokens_per_second_per_gpu"] != per_gpu
        or report["metric_units"]["ttft"] != "s"):
    fail("CCL-Bench's keys disagree with the serving figures")
if not 0 <= serving["mean_kv_cache_used"] <= serving["peak_kv_cache_used"] * (1 + 1e-9) <= 1:
    fail("KV cache occupancy out of [0, 1]")
if args.timeline:
    timeline = json.load(open(args.timeline))
    if timeline.get("kind") != "stagec-timeline":
        fail("not a stagec timeline")
    events = timeline["traceEvents"]
    iterations = [e for e in events if e["ph"] == "X"]
    counters = [e for e in events if e["ph"] == "C"]
    if len(iterations) != serving["iterations"] or len(counters) != len(iterations):
        fail(f"{len(iterations)} iteration events for {serving['iterations']} iterations")
    for engine in set(e["pid"] for e in iterations):
        runs = sorted((e["ts"], e["dur"]) for e in iterations if e["pid"] == engine)
        for (start, length), (after, _) in zip(runs, runs[1:]):
            if after < start + length - 1e-6:
                fail(f"engine {engine}: iterations overlap at {after} us")
print(f"ok: {serving['requests']} requests, {gpus} GPUs, "
      f"ttft {serving['ttft_ms']['mean']:.2f} ms, "
      f"tpot {serving['tpot_ms']['mean']:.2f} ms")
