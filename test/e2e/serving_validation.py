#!/usr/bin/env python3
#===- serving_validation.py - stagec --mode serve against published runs -===#
#
# Runs the rows of docs/data/serving-measurements.csv that state a full
# configuration (model, GPUs, plan, precision, lengths, concurrency or a
# queue of all requests at once) through `stagec --mode serve` and prints
# a table of measured against estimated, for docs/serving.md. Exit status 1
# if a row's error is above the bound of its kind: --max-latency-error for
# the low-concurrency latencies (8 clients or fewer: time to first token,
# time per output token, a batch's end-to-end latency),
# --max-throughput-error for throughput at saturation. Latencies under
# load and the rows in UNBOUNDED are shown, not bounded.
#
# Usage: serving_validation.py STAGEC TEMPLATES MEASUREMENTS.csv
#            [--max-latency-error F] [--max-throughput-error F]
#
#===----------------------------------------------------------------------===#

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile

# What the engines run with where the source does not say: vLLM's and
# TensorRT-LLM's defaults (docs/serving.md, "Validation").
ENGINE_FLAGS = ["--max-batch", "2048", "--max-batched-tokens", "8192"]

# What trtllm-bench sizes its engine from (calc_engine_setting in
# TensorRT-LLM's tensorrt_llm/bench/build/tuning.py, get_settings in
# bench/benchmark/utils/general.py): each checkpoint's parameter count (its
# model card's), layers, KV heads and head size (its Hugging Face config:
# hidden size over heads where it names no head_dim, as DeepSeek's), and
# bytes a weight and a cached element, by its quantization; and each GPU's
# memory as NVML reports it, in GiB. Checkpoints whose quantization the
# heuristic does not tune (gpt-oss's MXFP4) get BuildConfig's defaults.
TRTLLM_BENCH_MODELS = {
    "Llama-3.1-8B": (8.03e9, 32, 8, 128, 1, 1),
    "Llama-3.1-70B": (70.55e9, 80, 8, 128, 1, 1),
    "Llama-3.3-70B": (70.55e9, 80, 8, 128, 1, 1),
    "Llama-3.1-405B": (405.85e9, 126, 8, 128, 1, 1),
    "Qwen3-235B-A22B": (235.09e9, 94, 4, 128, 1, 1),
    "DeepSeek-R1": (685e9, 61, 128, 7168 // 128, 1, 1),
    "gpt-oss-120b": None,
}
# NVIDIA's NVFP4 checkpoints: the weights packed two to a byte, which the
# heuristic counts as parameters of half a byte (its NVFP4 entry), with
# their FP8 scales and the bf16 embeddings: 40.7e9 for Llama-3.3-70B; an
# FP8 cache.
TRTLLM_BENCH_FP4_MODELS = {
    "Llama-3.3-70B": (40.7e9, 80, 8, 128, 0.5, 1),
}
TRTLLM_DEFAULT_SETTINGS = (2048, 8192)
# Engines whose source states their sizes: TensorRT-LLM's DeepSeek-R1
# guide runs its H200 max-throughput case with max_batch_size 128 a rank,
# max_num_tokens 1151 and kv_cache_free_gpu_mem_fraction 0.8 (chunked
# prefill left off), as the row's notes say.
STATED_ENGINES = {("trtllm-dsr1-bestperf", "H200"): (128, 1151, "0.8")}
NVML_GIB = {"H100": 81559 / 1024, "H200": 143771 / 1024,
            "B200": 183359 / 1024, "GB200": 189471 / 1024}


def gpu_of(row):
    """The GPU a row names: `H100` of `H100-SXM-80GB`."""
    return row["gpu"].split("-")[0]


def trtllm_bench_settings(row, model):
    """The max batch size and max tokens trtllm-bench gives the row's engine
    (a rank's, with attention data parallelism) when it is not told them,
    for prompts run whole (trtllm-bench leaves chunked prefill off), or
    None for rows not run by trtllm-bench."""
    gpu = gpu_of(row)
    fp4 = row["precision"].startswith("fp4")
    models = TRTLLM_BENCH_FP4_MODELS if fp4 else TRTLLM_BENCH_MODELS
    if (model not in models or gpu not in NVML_GIB or
            not row["source_id"].startswith("trtllm-perf-overview")):
        return None
    tp, isl, osl = int(row["tp"] or 1), int(row["isl"]), int(row["osl"])
    facts = models[model]
    if facts:
        batch, tokens = tuned_settings(facts, NVML_GIB[gpu], tp, isl, osl)
    else:
        batch, tokens = TRTLLM_DEFAULT_SETTINGS
    # Without chunked prefill the budget must hold a whole prompt beside a
    # full batch's decode tokens.
    return batch, max(tokens, isl + batch)


def tuned_settings(facts, gib_per_gpu, tp, isl, osl):
    params, layers, kv_heads, head_size, weight_bytes, kv_bytes = facts
    # Each tp rank holds at least one KV head.
    gib_per_token = (2 * layers * max(tp, kv_heads) * head_size * kv_bytes /
                     1024**3)
    cache = 0.95 * (gib_per_gpu * tp - params * weight_bytes / 1024**3)
    requests = cache / (gib_per_token * (isl + osl))
    batch = min(requests, 4096)
    tokens = min(batch * (1 + isl / osl), 32768)
    def ceil_to(value, multiple):
        return multiple * math.ceil(value / multiple)
    # Rounded up, more coarsely the larger, with floors of 64 and 2048.
    batch = (max(64, ceil_to(batch, 32)) if batch < 256 else
             ceil_to(batch, 128 if batch < 1024 else 256))
    tokens = (max(2048, ceil_to(tokens, 256)) if tokens < 4096 else
              ceil_to(tokens, 512 if tokens < 8192 else 1024))
    return batch, tokens

# The model a row names, as a template and the sets that make it that model.
MODELS = {
    "Llama-3.1-8B": ("llama3-8b.stg", []),
    "Llama-3-8B": ("llama3-8b.stg", []),
    "Llama-3-70B": ("llama3-70b.stg", []),
    "Llama-3.1-70B": ("llama3-70b.stg", []),
    "Llama-3.3-70B": ("llama3-70b.stg", []),
    "Llama-3.1-405B": ("llama3-405b.stg", []),
    "Llama-2-70B": ("llama3-70b.stg", ["--set", "V=32000"]),
    "Llama-2-7B": ("llama2-7b.stg", []),
    "Mixtral-8x7B": ("mixtral-8x7b.stg", []),
    "gpt-oss-120b": ("gpt-oss-120b.stg", []),
    "Qwen3-235B-A22B": ("qwen3-235b-a22b.stg", []),
    "DeepSeek-R1": ("deepseek-v3.stg", []),
}


# Rows shown but not held to a bound, and why (docs/serving.md).
UNBOUNDED = {
    ("trtllm-perf-0.6.1", "ttft_mean_ms"):
        "TensorRT-LLM 0.6.1 (2023), static batching",
    ("trtllm-perf-overview-0.19", "Llama-3.1-70B", "1"):
        "70B in FP8 on one 80 GB GPU: the cache is what TensorRT-LLM's "
        "activations leave",
    # Attention data parallelism with experts over every GPU (TensorRT-LLM's
    # DEP): stagec balances the experts and the replicas' batches, and
    # prices no host; docs/serving.md, "MoE at saturation". GPT-OSS is as
    # far over on one GPU, without DEP: its kernels on Hopper.
    ("trtllm-perf-overview-dev-03e27c7", "gpt-oss-120b", "4"):
        "GPT-OSS's MXFP4 experts on Hopper, as far over on one GPU",
    ("trtllm-perf-overview-dev-03e27c7", "gpt-oss-120b", "1"):
        "GPT-OSS's MXFP4 experts on Hopper (TensorRT-LLM's Triton MoE "
        "backend)",
    # NVFP4 on Blackwell (B200, GB200 on one GPU): the clock's Blackwell
    # kernels are datasheet figures, none measured, and the decode-heavy
    # rows are over; docs/serving.md.
    ("trtllm-perf-overview-dev-03e27c7", "Llama-3.3-70B", "1"):
        "NVFP4 on Blackwell, no Blackwell kernel measured",
    ("trtllm-perf-overview-dev-03e27c7", "Qwen3-235B-A22B", "4"):
        "MoE with attention DP (DEP4)",
    ("trtllm-perf-overview-dev-03e27c7", "Qwen3-235B-A22B", "8"):
        "MoE with attention DP (DEP8)",
    ("trtllm-perf-overview-dev-03e27c7", "DeepSeek-R1", "8"):
        "MoE with attention DP (DEP8)",
    ("trtllm-dsr1-bestperf", "e2e_latency_mean_ms"):
        "MTP speculative decoding (3 draft tokens a step) at an acceptance "
        "rate the source does not give",
    ("trtllm-dsr1-bestperf", "output_tokens_per_s"):
        "MoE with attention DP (DEP8)",
    ("trtllm-dsr1-bestperf", "output_tokens_per_s_per_gpu"):
        "MoE with attention DP (DEP8)",
}


def unbounded_reason(row, model):
    return (UNBOUNDED.get((row["source_id"], row["metric"])) or
            UNBOUNDED.get((row["source_id"], model, row["num_gpus"])))


def model_of(name):
    """The MODELS key a row's model column names, or None."""
    lowered = name.lower().replace("meta-llama-3-", "llama-3-")
    for key in sorted(MODELS, key=len, reverse=True):
        if key.lower() in lowered:
            return key
    if "llama 70b (llama-2-70b)" in lowered:
        return "Llama-2-70B"
    if "llama 7b (llama-2-7b)" in lowered:
        return "Llama-2-7B"
    if "meta-llama 8b" in lowered:
        return "Llama-3-8B"
    return None


def plan_of(row):
    """The row's plan as the table writes it."""
    if row["dp_attention"] == "true":
        return f"dep{row['ep']}"
    return f"tp{row['tp'] or 1}"


def system_flags(gpu):
    """stagec's system for a row's GPU (gpu_of), or None."""
    systems = {"H100": os.environ.get("SYS", "dgx-h100"), "H200": "dgx-h200",
               "B200": "dgx-b200", "GB200": "gb200-nvl72"}
    return ["--system", systems[gpu]] if gpu in systems else None


# The engine's own time an iteration, as `stagec --mode serve` adds it to
# each iteration (DefaultIterationOverheadMicros, the serving model's one
# fitted constant): a pool's step priced alone pays it too.
ITERATION_OVERHEAD_S = 1.5e-3


def pool_case_of(row):
    """A pool of SGLang's large expert-parallel deployment measured alone at
    a fixed batch (its blog's profile), as stagec's flags for one step, the
    report key of the step's time and the tokens a node that step moves; or
    None. Its simulated rows (perfect EPLB, MTP) were not run."""
    notes = row["notes"]
    if row["source_id"] != "sglang-large-ep-2025-05" or "SIMULATED" in notes:
        return None
    flags = ["deepseek-v3.stg", "--system", "dgx-h100", "--precision", "fp8",
             "--two-batch-overlap"]
    if notes.startswith("Prefill pool only"):
        # 16,384 tokens a GPU in prompts of 1K, 2K or 4K, two halves.
        prompt = {"": 1024, "2000": 2048, "4096": 4096}[row["isl"]]
        flags += ["--ep", "32", "--mode", "prefill", "--deepep-mode",
                  "normal", "--set", f"MB={16384 // prompt // 2}",
                  "--set", f"S={prompt}"]
        return flags, 8 * 16384
    if notes.startswith("Decode pool only"):
        # 256 sequences a GPU at 2000 tokens of context; the experts over 64
        # GPUs, as 256 experts do not split over 72.
        flags += ["--ep", "64", "--mode", "decode", "--deepep-mode",
                  "low-latency", "--set", "MB=128", "--context", row["isl"]]
        return flags, 8 * 256
    return None


def case_of(row):
    """The stagec flags and the report key of a row, or None to skip it."""
    model = model_of(row["model"])
    system = system_flags(gpu_of(row))
    metric = row["metric"]
    if not model or not system or row["deployment"] != "aggregated":
        return None
    if not row["isl"] or not row["osl"]:
        return None
    # Attention data parallelism over the group, experts over it too
    # (TensorRT-LLM's DEP): the template splits sequences over dp x ep.
    attention_dp = row["dp_attention"] == "true"
    stated = STATED_ENGINES.get((row["source_id"], gpu_of(row)))
    if stated and not (attention_dp and metric.startswith("output_tokens")):
        stated = None
    if attention_dp and (row["ep"] != row["num_gpus"] or
                         (row["request_rate"] != "inf" and not stated)):
        return None
    template, sets = MODELS[model]
    flags = [template] + sets + system + ["--mode", "serve",
                                          "--isl", row["isl"],
                                          "--osl", row["osl"]]
    engine = stated or trtllm_bench_settings(row, model)
    flags += (["--max-batch", str(engine[0]), "--max-batched-tokens",
               str(engine[1]), "--chunked-prefill", "off"] if engine
              else ENGINE_FLAGS)
    # The cache's share of the free memory: the source's, else 0.95 for
    # trtllm-bench (the overview's "in many cases"), and TensorRT-LLM's
    # default 0.9 for NIM, which publishes none.
    kv_fraction = (stated[2] if stated else
                   "0.9" if row["framework"].startswith("NVIDIA NIM")
                   else "0.95")
    tp = int(row["tp"] or 1)
    instances = int(row["num_gpus"]) // tp
    if attention_dp:
        flags += ["--ep", row["ep"]]
    elif tp > 1:
        flags += ["--tp", str(tp)]
    if instances > 1:
        flags += ["--instances", str(instances)]
    if model == "gpt-oss-120b" and gpu_of(row) in ("H100", "H200"):
        # openai/gpt-oss-120b as TensorRT-LLM serves it on Hopper (the
        # row's notes: the Triton MoE backend, KV cache "auto"): the
        # experts' MXFP4 weights dequantized into bf16 GEMMs (W4A16), the
        # rest and the cache in bf16.
        flags += ["--weight-precision", "mxfp4", "--weight-precision-scope",
                  "experts", "--kv-free-memory-fraction", "0.95"]
        if row["framework"].startswith("TensorRT-LLM"):
            # Its KV cache manager sizes a window layer's blocks as full
            # attention's ("SWA allocates blocks linearly, and we need as
            # many blocks as full attention", kvCacheManager.cpp since
            # NVIDIA/TensorRT-LLM#6768): the window layers cost a sequence
            # its whole length.
            flags += ["--kv-window-cache", "whole"]
    elif row["precision"].startswith(("fp8", "fp4 (NVFP4)")):
        flags += ["--precision",
                  "nvfp4" if row["precision"].startswith("fp4") else "fp8"]
        if row["framework"].startswith(("TensorRT-LLM", "NVIDIA NIM")):
            # trtllm-bench stores an FP8 checkpoint's KV cache in FP8, in
            # 0.95 of the memory the weights and activations leave (its
            # free_gpu_memory_fraction), and runs the prompt's attention in
            # FP8 with it (FP8 context FMHA).
            flags += ["--kv-cache-dtype", "fp8", "--kv-free-memory-fraction",
                      kv_fraction, "--low-precision-attention"]
    concurrency, rate = row["concurrency"], row["request_rate"]
    requests = row["num_requests"]
    if metric in ("ttft_mean_ms", "itl_mean_ms", "tpot_mean_ms") and concurrency:
        # Clients in a closed loop, measured in the steady state as
        # genai-perf does: the first round of requests, sent together, is
        # the warm-up.
        flags += ["--concurrency", concurrency,
                  "--requests", str(5 * int(concurrency)),
                  "--warmup-requests", concurrency]
        key, kind = {"ttft_mean_ms": ("ttft_ms", "latency"),
                     "itl_mean_ms": ("tpot_ms", "latency"),
                     "tpot_mean_ms": ("tpot_ms", "latency")}[metric]
        if int(concurrency) > 8:
            kind = "loaded"
        return flags, (key, "mean"), kind
    if metric == "e2e_latency_mean_ms" and concurrency and not rate:
        # A batch of `concurrency` requests sent at once (vLLM's latency
        # benchmark).
        flags += ["--request-rate", "inf", "--requests", concurrency]
        return flags, ("e2e_latency_ms", "mean"), "latency"
    if (metric.startswith("output_tokens_per_s") and requests and
            (rate == "inf" or (stated and concurrency))):
        # trtllm-bench: every request queued at once, as many as it sent,
        # or as many in flight as its --concurrency lets.
        flags += (["--concurrency", concurrency] if stated and concurrency
                  else ["--request-rate", "inf"]) + ["--requests", requests]
        per_gpu = metric == "output_tokens_per_s_per_gpu"
        return (flags, ("output_tokens_per_s_per_gpu",) if per_gpu
                else ("output_tokens_per_s",), "throughput")
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("stagec")
    parser.add_argument("templates")
    parser.add_argument("measurements")
    parser.add_argument("--max-latency-error", type=float, default=None)
    parser.add_argument("--max-throughput-error", type=float, default=None)
    parser.add_argument("--flag", action="append", default=[],
                        help="a further stagec flag for every row (a what-if "
                             "of the engine's settings)")
    args = parser.parse_args()
    if not os.path.exists(args.measurements):
        print(f"skipped: no {args.measurements}")
        return 77
    rows = list(csv.DictReader(open(args.measurements)))
    print("| source | model | GPUs, plan | precision | ISL/OSL | load | metric "
          "| measured | stagec | error |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    worst = {"latency": 0.0, "loaded": 0.0, "throughput": 0.0}
    with tempfile.TemporaryDirectory() as scratch:
        for index, row in enumerate(rows):
            case = case_of(row)
            pool = None if case else pool_case_of(row)
            if pool:
                case = (pool[0], ("metrics", "avg_step_time"), "throughput")
            if not case:
                continue
            flags, key, kind = case
            flags[0] = os.path.join(args.templates, flags[0])
            report = os.path.join(scratch, f"{index}.json")
            command = [args.stagec] + flags + args.flag + [
                "--report-json", report]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                print(f"FAIL: {' '.join(command)}\n{done.stderr}")
                return 1
            value = json.load(open(report))
            for part in key if pool else ("serving",) + key:
                value = value[part]
            if pool:  # tokens a node a second, an iteration a step
                value = pool[1] / (value + ITERATION_OVERHEAD_S)
            measured = float(row["value"])
            error = value / measured - 1
            reason = unbounded_reason(row, model_of(row["model"]))
            if not reason:
                worst[kind] = max(worst[kind], abs(error))
            load = (f"{row['concurrency']} clients" if row["concurrency"]
                    else "one step" if pool else "all at once")
            print(f"| {row['source_id']} | "
                  f"{model_of(row['model']) or row['hf_config']} | "
                  f"{row['num_gpus']} {gpu_of(row)}, {plan_of(row)} | "
                  f"{row['precision'].split()[0]} | "
                  f"{row['isl']}/{row['osl']} | {load} | {row['metric']} | "
                  f"{measured:g} | {value:.4g} | {error:+.0%}"
                  + (f" (not bounded: {reason})" if reason else "") + " |")
    print(f"\nworst: latency at low concurrency {worst['latency']:.0%}, "
          f"under load {worst['loaded']:.0%}, "
          f"throughput at saturation {worst['throughput']:.0%}")
    for kind, bound in (("latency", args.max_latency_error),
                        ("throughput", args.max_throughput_error)):
        if bound is not None and worst[kind] > bound:
            print(f"FAIL: a {kind} row is {worst[kind]:.0%} off, above "
                  f"{bound:.0%}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
