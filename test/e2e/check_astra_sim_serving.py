#!/usr/bin/env python3
#===- check_astra_sim_serving.py - Serving windows in ASTRA-sim -----------===#
#
# Usage: check_astra_sim_serving.py STAGEC TEMPLATES ASTRA_DIR WORKDIR [--table]
#
# Writes the traces of serving windows (`stagec --mode serve -o`, on DGX
# H100 nodes): continuous-batching instances (tensor, data and pipeline
# parallel, a MoE, all requests at once) and disaggregated pairs with their
# KV caches sent between the pools, in a node and across two. Runs
# ASTRA-sim's analytical backend on each with the configs stagec wrote and
# compares its time (the last rank to finish) with the manifest's estimate
# of the window, as check_astra_sim.py does for training steps. Every rank
# must finish, a pair's prefill ranks must send and its decode ranks
# receive, and the estimate must be within the case's tolerance. Exits 77
# (skipped) when ASTRA_DIR has no runner. --table prints the comparison as
# Markdown (docs/serving.md, "Traces of a serving window").
#
#===----------------------------------------------------------------------===#

import os
import sys

from check_astra_sim import prepare_run, read_manifest, run, run_astra_sim

WORKLOAD = ["--isl", "1024", "--osl", "128", "--concurrency", "16"]

# name, template, flags, tolerance (fraction of ASTRA-sim's time). In a
# node 5 %, across nodes 10 %, as the training check; a larger tolerance
# names its reason.
CASES = [
    ("tp4", "llama3-8b.stg", ["--tp", "4"], 0.05),
    ("tp4-dp2", "llama3-8b.stg", ["--tp", "4", "--dp", "2"], 0.05),
    # Two slot engines' iterations through two stages.
    ("tp2-pp2", "llama3-8b.stg", ["--tp", "2", "--pp", "2", "--requests",
                                  "64"], 0.05),
    ("tp8-all-at-once", "llama3-8b.stg",
     ["--tp", "8", "--isl", "1024", "--osl", "128", "--request-rate", "inf",
      "--requests", "64"], 0.05),
    # A lone prefill of this MoE differs as much (stagec 115.3 ms, ASTRA-sim
    # 125.9 ms): the window adds no gap of its own.
    ("ep4-tp2-moe", "mixtral-8x7b.stg", ["--tp", "2", "--ep", "4"], 0.10),
    # Two-batch overlap: each iteration's two halves in turns, the
    # exchanges in the order SGLang issues them; one half's combine and the
    # other's dispatch lie on the path, small all-to-alls that ASTRA-sim's
    # ring takes longer over (0.925; docs/serving.md).
    ("ep8-tbo-moe", "mixtral-8x7b.stg", ["--ep", "8", "--two-batch-overlap"],
     0.10),
    # The pair fills one node: the caches cross NVLink.
    ("pair-tp4", "llama3-8b.stg", ["--prefill-pool", "1xtp4",
                                   "--decode-pool", "1xtp4"], 0.05),
    # A node each: the caches cross the NICs.
    ("pair-tp8", "llama3-8b.stg", ["--prefill-pool", "1xtp8",
                                   "--decode-pool", "1xtp8"], 0.10),
    ("pair-tp2-pp2", "llama3-8b.stg", ["--prefill-pool", "1xtp2pp2",
                                       "--decode-pool", "1xtp2pp2",
                                       "--requests", "64"], 0.05),
    # Two plans: four tp 2 prefill instances fill a node beside one tp 8
    # decode instance; each prefill rank sends its caches to one decode rank
    # across the NICs.
    ("pair-tp2-to-tp8", "llama3-8b.stg", ["--prefill-pool", "4xtp2",
                                          "--decode-pool", "1xtp8"], 0.10),
    # One tp 2 prefill instance beside two tp 1 decode instances of three
    # stages, in one node: the prefill stage sends each decode stage its
    # layers, half to each replica.
    ("pair-tp2-to-pp3", "llama3-8b.stg", ["--prefill-pool", "1xtp2",
                                          "--decode-pool", "2xpp3",
                                          "--requests", "64"], 0.05),
    # One tp 8 prefill instance beside two tp 4 decode instances of two
    # stages, a node each. The prefill side is the longer one here (in
    # pair-tp8 the decode side hides it): ASTRA-sim rings the 67 MB
    # all-reduces that the clock takes as NVLS, and issues a rank's
    # communication one at a time, so each prefill rank's 128 sends of 8 MiB
    # through the NICs hold back its all-reduces on NVLink (docs/serving.md).
    ("pair-tp8-to-tp4pp2", "llama3-8b.stg", ["--prefill-pool", "1xtp8",
                                             "--decode-pool", "2xtp4pp2",
                                             "--requests", "64"], 0.12),
]


def check_messages(name, manifest):
    """A pair's prefill ranks send every cache, its decode ranks receive it:
    what each instance sends beyond what it receives from itself (pipeline
    stages' activations). Each decode rank of the decode instance receives
    what it holds of a cache (bytes_per_rank), spread over its replicas in
    the pair's stages, each message rounded to the byte."""
    window = manifest["serving_window"]
    if "decode_iterations" not in window:
        return None
    prefill, decode = window["instances"]
    classes = manifest["rank_classes"]

    def net(part, out, back):
        return sum((c[out] - c[back]) * c["ranks"] for c in part)

    first_decode = decode["first_stage"]
    sent = net([c for c in classes if c["stage"] < first_decode],
               "send_bytes", "recv_bytes")
    received = net([c for c in classes if c["stage"] >= first_decode],
                   "recv_bytes", "send_bytes")
    holders = decode["ranks_per_stage"] * decode["stages"]
    expected = holders * sum(t["bytes_per_rank"]
                             for t in window["kv_transfers"])
    messages = (prefill["stages"] * decode["stages"] *
                manifest["mesh"]["ranks"] * len(window["kv_transfers"]))
    if expected == 0 or sent != received or abs(sent - expected) > messages:
        return "%s: KV caches of %d bytes, %d sent, %d received" % (
            name, expected, sent, received)
    return None


def main():
    stagec, templates, astra, workdir = sys.argv[1:5]
    table = "--table" in sys.argv[5:]
    runner = prepare_run(astra, workdir)
    if not runner:
        return 77
    failures = 0
    rows = []
    for name, template, flags, tolerance in CASES:
        out = os.path.join(workdir, name)
        workload = [] if "--request-rate" in flags else WORKLOAD
        status, output = run([stagec, os.path.join(templates, template),
                              "--mode", "serve", "--system", "dgx-h100",
                              "-q", "-o", out] + workload + flags)
        if status != 0:
            failures += 1
            print("FAIL %s: stagec\n%s" % (name, output))
            continue
        manifest = read_manifest(out)
        problem = check_messages(name, manifest)
        if problem:
            failures += 1
            print("FAIL " + problem)
            continue
        ranks = manifest["mesh"]["ranks"]
        astra_micros, output = run_astra_sim(runner, out, manifest)
        if astra_micros is None:
            failures += 1
            print("FAIL %s: ASTRA-sim did not finish every rank\n%s" %
                  (name, output[-2000:]))
            continue
        estimate = manifest["step_estimate"]["step_micros"]
        window = manifest["serving_window"]
        iterations = len(window["iterations"]) + len(
            window.get("decode_iterations", []))
        ratio = estimate / astra_micros
        ok = abs(ratio - 1) <= tolerance
        if not ok:
            failures += 1
        rows.append((name, " ".join(flags), ranks, iterations,
                     len(window.get("kv_transfers", [])), astra_micros,
                     estimate, ratio))
        print("%s %-16s %3d iterations  ASTRA-sim %10.1f us  stagec %10.1f us"
              "  ratio %.3f (within %.0f %%)" %
              ("ok  " if ok else "FAIL", name, iterations, astra_micros,
               estimate, ratio, 100 * tolerance))
    if table:
        print("\n| window | flags | ranks | iterations | KV caches | "
              "ASTRA-sim (ms) | stagec (ms) | stagec / ASTRA-sim |")
        print("|---|---|---|---|---|---|---|---|")
        for name, flags, ranks, iterations, caches, astra_micros, estimate, \
                ratio in rows:
            print("| %s | `%s` | %d | %d | %d | %.2f | %.2f | %.3f |" %
                  (name, flags, ranks, iterations, caches,
                   astra_micros / 1000, estimate / 1000, ratio))
    print("%d of %d windows agree" % (len(CASES) - failures, len(CASES)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
