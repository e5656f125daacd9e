#!/usr/bin/env python3
"""Prices the forward steps bench/gpu/measure_steps.py timed, with stagec.

Each measured step (a decode batch against a KV cache, or a prefill of one
sequence, of a Llama model's rank on one GPU) is compiled with
`stagec --mode decode|prefill --device GPU --timeline` (`--linear-kernels
fused` for a step measured with fused QKV and gate/up weights, `separate`
for one measured with --split-linear) and its nodes summed
by kind: the decoder layers' GEMMs (the linear layers' einsums), the
attention core and the rest (norms, activations, residual adds). The
measurement's profiled kernels are summed the same way (its LM head's
GEMM, the one kernel called once a step, left out: stagec's prefill runs
the head over every token, a server over the sampled ones; the FP8 casts
of the GEMMs' inputs with the GEMMs, as stagec's nodes hold them). Prints a row
a step and the error of each kind; with --max-gemm-error and
--max-attention-error, exits 1 when a mean |error| passes its bound (decode
attention with fewer sequences x KV heads than SMs is shown, not bounded:
SDPA's kernels leave the GPU partly idle there).

  python3 test/e2e/step_model_check.py build/tools/stagec/stagec templates \\
      docs/data/gpu/h200-steps.csv docs/data/gpu/h200-step-kernels.csv \\
      --device H200

The rest is not bounded: PyTorch runs RoPE, RMSNorm and SwiGLU as several
unfused kernels each, which an engine fuses (docs/validation.md).
"""

import argparse
import csv
import functools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

# Decode attention through SDPA runs a block per sequence and KV head, with
# no split of the context: fewer such blocks than the GPU's 132 SMs leave it
# partly idle where an engine's split-KV kernel would not (docs/validation.md).
SMS = 132

GEMM_NODES = re.compile(r"\.(attention\.[qkvy]|swiglu\.[guy])$")
ATTENTION_NODES = re.compile(r"\.attention\.o$")


def read_csv(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


@functools.lru_cache(maxsize=None)
def kv_heads_per_rank(stagec, templates, template, tp):
    """A template's KV heads on one of `tp` ranks, from --print-dims."""
    listing = subprocess.run(
        [stagec, os.path.join(templates, template + ".stg"), "--tp", tp,
         "--print-dims"], check=True, text=True,
        stdout=subprocess.PIPE).stdout
    heads = int(re.search(r"^\s+KVH\s+(\d+)", listing, re.M).group(1))
    return heads // int(tp)


def stagec_step(stagec, templates, row, device, scratch):
    """Microseconds of stagec's layer GEMMs, attention core and the rest."""
    timeline = os.path.join(scratch, "timeline.json")
    command = [stagec, os.path.join(templates, row["template"] + ".stg"),
               "--mode", row["mode"], "--device", device, "--set", "B=%s" %
               row["batch"], "--precision", row["precision"],
               "--timeline", timeline, "--linear-kernels",
               "separate" if row.get("linear") == "split" else "fused"]
    if int(row["tp"]) > 1:
        command += ["--tp", row["tp"]]
    if row["mode"] == "decode":
        command += ["--context", row["context"], "--kv-cache-dtype", "bf16"]
    else:
        command += ["--set", "S=%s" % row["context"]]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    with open(timeline) as handle:
        events = json.load(handle)
    if isinstance(events, dict):
        events = events["traceEvents"]
    kinds = {"gemm": 0.0, "attention": 0.0, "other": 0.0}
    for event in events:
        if event.get("ph") != "X" or event.get("pid") != 0 or \
                event.get("cat") != "compute":
            continue
        name = event["name"].rsplit(".mb", 1)[0]
        if not name.startswith("layer."):
            continue  # embedding, final norm, LM head, loss
        kind = "gemm" if GEMM_NODES.search(name) else \
            "attention" if ATTENTION_NODES.search(name) else "other"
        kinds[kind] += event["dur"]
    return kinds, command


def step_key(row):
    # Rows measured before --split-linear existed ran fused layers.
    return (row["model"], row.get("linear") or "fused", row["mode"],
            row["precision"], row["batch"], row["context"])


def measured_step(row, kernels):
    """The measurement's kernel microseconds by kind, its LM head's GEMM
    (the GEMM called once a step) left out, the FP8 casts of the GEMMs'
    inputs with the GEMMs (a stagec GEMM node holds its casts)."""
    key = step_key(row)
    kinds = {"gemm": 0.0, "attention": 0.0, "other": 0.0}
    for kernel in kernels.get(key, []):
        if kernel["kind"] == "gemm" and int(kernel["calls"]) == 1:
            continue
        kind = "gemm" if "float8_copy" in kernel["name"] else kernel["kind"]
        kinds[kind] += float(kernel["micros"])
    return kinds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stagec")
    parser.add_argument("templates")
    parser.add_argument("steps", help="measure_steps.py's CSV")
    parser.add_argument("kernels", help="its --kernels CSV")
    parser.add_argument("--device", default="H200")
    parser.add_argument("--max-gemm-error", type=float)
    parser.add_argument("--max-attention-error", type=float)
    args = parser.parse_args()

    kernels = {}
    for kernel in read_csv(args.kernels):
        kernels.setdefault(step_key(kernel), []).append(kernel)
    errors = {"gemm": [], "attention": []}
    print("| model | step | precision | batch | tokens in cache or prompt |"
          " GEMMs measured | stagec | error | attention measured | stagec |"
          " error | other measured | stagec |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for row in read_csv(args.steps):
            priced, _ = stagec_step(args.stagec, args.templates, row,
                                    args.device, scratch)
            measured = measured_step(row, kernels)
            cells = []
            blocks = int(row["batch"]) * kv_heads_per_rank(
                args.stagec, args.templates, row["template"], row["tp"])
            for kind in ("gemm", "attention"):
                error = priced[kind] / measured[kind] - 1
                bounded = kind == "gemm" or row["mode"] == "prefill" or \
                    blocks >= SMS
                if bounded:
                    errors[kind].append(error)
                cells += ["%.0f" % measured[kind], "%.0f" % priced[kind],
                          "%+.0f %%" % (100 * error) +
                          ("" if bounded else " (not bounded)")]
            cells += ["%.0f" % measured["other"], "%.0f" % priced["other"]]
            print("| %s | %s | %s | %s | %s | %s |" %
                  (row["model"], row["mode"], row["precision"], row["batch"],
                   row["context"], " | ".join(cells)))
    failed = False
    for kind, bound in (("gemm", args.max_gemm_error),
                        ("attention", args.max_attention_error)):
        values = errors[kind]
        mean = statistics.mean(abs(e) for e in values)
        worst = max(values, key=abs)
        print("%s: %d steps, median %+.1f %%, mean |error| %.1f %%, worst "
              "%+.1f %%" % (kind, len(values),
                            100 * statistics.median(values), 100 * mean,
                            100 * worst))
        if bound is not None and mean > bound:
            print("error: %s mean |error| %.1f %% exceeds %.1f %%" %
                  (kind, 100 * mean, 100 * bound), file=sys.stderr)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
