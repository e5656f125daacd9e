"""Checks the `variants` object of a `stagec --report-json` document.

Usage: check_variants.py REPORT.json [--count K] [--slowdown PCT]

The percentiles must be ordered and each be the nearest-rank value of the
per-variant `step_times` (the p-th of n sorted values is the
ceil(p n / 100)-th); the slowdowns and the GPU time wasted must follow from
the step times, the clean step and the GPUs; no number may be NaN or
infinite. With --count, there must be K variants; with --slowdown, every
variant must be PCT per cent slower than the clean step (to 0.05). Prints
`ok` and a summary for FileCheck.
"""
import argparse
import json
import math
import sys

KEYS = ["min", "median", "p90", "p99", "max"]
PERCENTS = {"min": 0, "median": 50, "p90": 90, "p99": 99, "max": 100}


def refuse_constant(name):
    raise ValueError("not JSON: %s" % name)


def nearest_rank(values, percent):
    ordered = sorted(values)
    rank = max(1, math.ceil(percent * len(ordered) / 100))
    return ordered[rank - 1]


def check_spread(name, spread, values, tolerance):
    for key in KEYS:
        expected = nearest_rank(values, PERCENTS[key])
        if not math.isclose(spread[key], expected, rel_tol=tolerance,
                            abs_tol=tolerance):
            sys.exit("%s.%s is %r, the nearest-rank value is %r"
                     % (name, key, spread[key], expected))
    ordered = [spread[key] for key in KEYS]
    if ordered != sorted(ordered):
        sys.exit("%s: percentiles out of order: %r" % (name, ordered))
    mean = sum(values) / len(values)
    if not math.isclose(spread["mean"], mean, rel_tol=tolerance,
                        abs_tol=tolerance):
        sys.exit("%s.mean is %r, not %r" % (name, spread["mean"], mean))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("report")
    parser.add_argument("--count", type=int)
    parser.add_argument("--slowdown", type=float)
    args = parser.parse_args()
    with open(args.report) as f:
        report = json.load(f, parse_constant=refuse_constant)
    variants = report["variants"]
    units = variants["units"]
    if (units["step_time"], units["slowdown"], units["gpu_time_wasted"]) != (
            "s", "%", "GPU-s"):
        sys.exit("unexpected units %r" % units)
    if variants["percentiles"] != "nearest-rank":
        sys.exit("percentiles are %r" % variants["percentiles"])
    times = variants["step_times"]
    count = variants["count"]
    if count != len(times) or count < 1:
        sys.exit("count %d with %d step times" % (count, len(times)))
    if args.count is not None and count != args.count:
        sys.exit("%d variants, expected %d" % (count, args.count))
    clean = variants["clean_step_time"]
    gpus = variants["gpus"]
    if not clean > 0 or gpus != report["mesh"]["ranks"]:
        sys.exit("clean step %r on %r GPUs" % (clean, gpus))
    # The clean step of the (unscaled) variants is the report's estimate,
    # to the nanosecond (folded programs match arrivals to it).
    if variants["scale"] == 1 and not math.isclose(
            clean, report["metrics"]["avg_step_time"], rel_tol=0,
            abs_tol=1e-9):
        sys.exit("clean step %r, the report's %r"
                 % (clean, report["metrics"]["avg_step_time"]))
    if not 1 <= variants["replicas"] <= gpus:
        sys.exit("%r replicas of %d GPUs" % (variants["replicas"], gpus))

    # The step-time percentiles are the per-variant values themselves.
    for key in KEYS:
        if variants["step_time"][key] not in times:
            sys.exit("step_time.%s %r is not a variant's step time"
                     % (key, variants["step_time"][key]))
    check_spread("step_time", variants["step_time"], times, 1e-12)
    slowdowns = [100 * (t - clean) / clean for t in times]
    check_spread("slowdown", variants["slowdown"], slowdowns, 1e-9)
    wasted = [gpus * (t - clean) for t in times]
    check_spread("gpu_time_wasted", variants["gpu_time_wasted"], wasted, 1e-9)
    fraction = 100 * sum(t - clean for t in times) / sum(times)
    if not math.isclose(variants["gpu_time_wasted_fraction"], fraction,
                        rel_tol=1e-9, abs_tol=1e-9):
        sys.exit("gpu_time_wasted_fraction %r, not %r"
                 % (variants["gpu_time_wasted_fraction"], fraction))
    if args.slowdown is not None:
        for index, slowdown in enumerate(slowdowns):
            # Within the rounding of durations to whole microseconds.
            if not math.isclose(slowdown, args.slowdown, abs_tol=0.05):
                sys.exit("variant %d is %.4f %% slower, expected %.4f %%"
                         % (index, slowdown, args.slowdown))
    print("ok: %d variants of %s, seed %s, clean %.6g s, slowdown median "
          "%.2f %% p99 %.2f %% max %.2f %%, %d distinct"
          % (count, variants["spec"].split("/")[-1], variants["seed"], clean,
             variants["slowdown"]["median"], variants["slowdown"]["p99"],
             variants["slowdown"]["max"], len(set(times))))


if __name__ == "__main__":
    main()
