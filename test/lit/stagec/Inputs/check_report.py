"""Checks a `stagec --report-json` document against its own numbers.

Usage: check_report.py REPORT.json [--manifest MANIFEST.json] [--no-metrics]

Every metric is recomputed from what the report says beside it (the step
estimate, the system, the dims, the collectives' traffic) and must agree
with the value stagec wrote; with --manifest, the trace set's manifest must
hold the same metrics. Prints `ok` and a few values for FileCheck.
"""
import json
import math
import sys

METRICS = {
    "avg_step_time", "mfu", "hfu", "model_flops", "hardware_flops",
    "tokens_per_second_per_gpu", "communication_fraction",
    "total_communication_time", "compute_comm_overlap",
    "pipeline_bubble_fraction", "load_imbalance_ratio", "bw_allreduce",
    "bw_allgather", "bw_reducescatter", "bw_alltoall", "ttft", "tpot",
    "scale_up_bw_utility", "scale_out_bw_utility", "scale_up_domain_utility",
}
BANDWIDTH_KEYS = {"ALL_REDUCE": "bw_allreduce", "ALL_GATHER": "bw_allgather",
                  "REDUCE_SCATTER": "bw_reducescatter",
                  "ALL_TO_ALL": "bw_alltoall"}


def refuse_constant(name):
    raise ValueError("not JSON: %s" % name)


def load(path):
    with open(path) as f:
        return json.load(f, parse_constant=refuse_constant)


def close(got, expected, what, tolerance=1e-9):
    scale = max(abs(expected), 1e-30)
    assert abs(got - expected) <= tolerance * scale, \
        "%s: %r, expected %r" % (what, got, expected)


def main():
    args = sys.argv[1:]
    report = load(args[0])
    manifest = load(args[args.index("--manifest") + 1]) \
        if "--manifest" in args else None
    assert report["kind"] == "stagec-report", report["kind"]
    assert report["generator"] == "stagec"
    for trace_only in ("files", "rank_coordinates", "comm_groups"):
        assert trace_only not in report, trace_only
    for summary in report["rank_classes"]:
        assert isinstance(summary["schedule"], str)

    metrics = report["metrics"]
    if "--no-metrics" in args:
        assert metrics is None and report["step_estimate"] is None, metrics
        print("ok: no metrics")
        return
    assert set(metrics) == METRICS, set(metrics) ^ METRICS
    assert set(report["metric_units"]) == METRICS

    step = report["step_estimate"]
    system = report["system"]
    ranks = report["mesh"]["ranks"]
    seconds = metrics["avg_step_time"]
    assert abs(seconds * 1e6 - step["step_micros"]) <= 0.5, seconds
    capacity = system["peak_tflops"] * 1e12 * ranks * seconds
    close(metrics["mfu"], 100 * metrics["model_flops"] / capacity, "mfu")
    close(metrics["hfu"], 100 * metrics["hardware_flops"] / capacity, "hfu")
    assert metrics["hardware_flops"] >= metrics["model_flops"] * (1 - 1e-12)

    stages = step["stages"]
    waits = sum(s["pipeline_wait_micros"] for s in stages) / len(stages)
    # The manifest rounds each stage's time to a microsecond.
    close(metrics["pipeline_bubble_fraction"],
          100 * waits / step["step_micros"], "bubble", 1e-2)

    dims = report["dims"]
    mode = report["options"]["mode"]
    if "B" in dims and "S" in dims:
        tokens = dims["B"] * dims["S"] * report["pipeline"]["microbatches"]
        close(metrics["tokens_per_second_per_gpu"],
              tokens / seconds / ranks, "tokens/s/GPU")
    assert (metrics["ttft"] is not None) == (mode == "prefill"), mode
    assert (metrics["tpot"] is not None) == (mode == "decode"), mode
    for key in ("ttft", "tpot"):
        if metrics[key] is not None:
            close(metrics[key], seconds, key)

    for name, traffic in step["collectives"].items():
        key = BANDWIDTH_KEYS[name]
        if traffic["count"] == 0:
            assert metrics[key] is None, key
        else:
            close(metrics[key],
                  traffic["bus_bytes"] / traffic["micros"] * 1e6 / 1e9, key)

    for key in ("communication_fraction", "compute_comm_overlap",
                "pipeline_bubble_fraction"):
        value = metrics[key]
        assert value is None or 0 <= value <= 100, (key, value)
    assert metrics["load_imbalance_ratio"] >= 1, metrics
    for key in ("scale_up_bw_utility", "scale_out_bw_utility",
                "scale_up_domain_utility"):
        assert -100 < metrics[key] < 100, (key, metrics[key])
    for key, value in metrics.items():
        assert value is None or math.isfinite(value), key

    if manifest is not None:
        assert manifest["metrics"] == metrics, "manifest and report differ"
        assert manifest["step_estimate"] == step
    print("ok: mfu %.1f %%, %s" % (metrics["mfu"], " ".join(
        "%s=%.1f" % (key[:-8], metrics[key]) for key in sorted(metrics)
        if key.endswith("_utility"))))


if __name__ == "__main__":
    main()
