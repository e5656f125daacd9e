#!/usr/bin/env python3
#===- check_strategy_matrix.py - stagec over many parallel plans ----------===#
#
# Usage: check_strategy_matrix.py STAGEC STAGE_ET TEMPLATES WORKDIR
#
# Compiles small models under a matrix of parallel plans (dp, tp with and
# without sequence parallelism, pp with both schedules, cp, FSDP, recompute,
# prefill, decode, gzip, mixed; ep on the MoE templates; a sliding window
# on Mistral), and every shipped preset shrunk to two layers (a layer
# pattern's to one period or so), and checks
# every trace set twice over: with `stage-et verify` and with
# check_trace_set.py, the independent Python decoder. Also checks that a
# second run writes byte-identical files.
#
#===----------------------------------------------------------------------===#

import filecmp
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "..", "chakra", "check_trace_set.py")

SMALL_LLAMA = ["--set", "L=4", "--set", "S=256", "--set", "D=512",
               "--set", "F=1024", "--set", "NH=8", "--set", "KVH=4",
               "--set", "V=1024"]

# Other templates keep their full widths (the node count does not depend
# on them) but get few layers and short sequences.
SHORT = ["--set", "L=4", "--set", "S=256", "--set", "B=4"]

MATRIX = [
    ("dp", ["--dp", "4"]),
    ("tp-sp", ["--tp", "4"]),
    ("tp-nosp", ["--tp", "2", "--set", "sequence_parallel=false"]),
    ("pp-1f1b", ["--pp", "4", "--microbatches", "6"]),
    ("pp-gpipe", ["--pp", "2", "--microbatches", "3", "--schedule", "gpipe"]),
    ("pp-uneven", ["--pp", "3", "--tp", "2"]),
    ("pp-interleaved", ["--pp", "2", "--tp", "2", "--dp", "2",
                        "--virtual-stages", "2", "--microbatches", "4"]),
    ("cp", ["--cp", "2", "--dp", "2"]),
    ("fsdp", ["--dp", "4", "--fsdp"]),
    ("zero1", ["--dp", "2", "--tp", "2", "--pp", "2", "--cp", "2",
               "--distributed-optimizer"]),
    ("buckets", ["--dp", "2", "--tp", "2", "--pp", "2", "--fsdp",
                 "--grad-bucket-mb", "25"]),
    ("recompute", ["--tp", "2", "--pp", "2", "--recompute", "full"]),
    ("selective", ["--tp", "2", "--recompute", "selective"]),
    ("prefill", ["--tp", "2", "--pp", "2", "--mode", "prefill"]),
    ("decode", ["--tp", "2", "--pp", "2", "--dp", "2", "--mode", "decode",
                "--context", "1024"]),
    ("gzip", ["--dp", "2", "--tp", "2", "--gzip"]),
    ("mixed", ["--dp", "2", "--tp", "2", "--pp", "2", "--cp", "2",
               "--microbatches", "4"]),
    ("rank-order", ["--dp", "2", "--tp", "2", "--pp", "2",
                    "--rank-order", "dp,tp,cp,ep,pp"]),
    ("mixtral-ep", ["--ep", "4", "--tp", "2"], "mixtral.stg"),
    ("mixtral-ep-dp-pp", ["--ep", "2", "--dp", "2", "--pp", "2"],
     "mixtral.stg"),
    # Decode routes B tokens: enough for every expert-parallel rank to get
    # whole capacity slots.
    ("mixtral-decode", ["--ep", "2", "--tp", "2", "--mode", "decode",
                        "--set", "B=16"], "mixtral.stg"),
    # Any batch decodes with expert parallelism: one token per rank still
    # gets a slot at every expert (nn/moe.stg).
    ("mixtral-decode-any-batch", ["--ep", "4", "--tp", "2", "--mode",
                                  "decode"], "mixtral.stg"),
    ("deepseek-mla-moe", ["--ep", "2", "--tp", "2", "--pp", "2"],
     "deepseek.stg"),
    # DeepSeek-V3's multi-token prediction: one MTP depth after the last
    # layer, on the last stage, with its own loss.
    ("deepseek-mtp", ["--ep", "2", "--tp", "2", "--pp", "2",
                      "--set", "MTP=1"], "deepseek.stg"),
    ("deepseek-moe-fsdp", ["--ep", "2", "--dp", "2", "--fsdp"],
     "deepseek-moe.stg"),
    ("gpt-tp-pp", ["--tp", "2", "--pp", "2", "--dp", "2", "--set", "V=50304"],
     "gpt.stg"),
    ("mamba-dp-tp", ["--tp", "2", "--dp", "2", "--pp", "2"], "mamba.stg"),
    ("palm-cp", ["--tp", "2", "--cp", "2"], "palm.stg"),
    # Sliding-window attention (WIN = 64 of S = 256): training over cp,
    # prefill, and decode with a context longer and shorter than the window.
    ("mistral-cp-pp", ["--tp", "2", "--cp", "2", "--pp", "2",
                       "--set", "WIN=64"], "mistral.stg"),
    ("mistral-prefill", ["--tp", "2", "--pp", "2", "--mode", "prefill",
                         "--set", "WIN=64"], "mistral.stg"),
    ("mistral-decode", ["--tp", "2", "--dp", "2", "--mode", "decode",
                        "--context", "1024", "--set", "WIN=64"],
     "mistral.stg"),
    ("mistral-decode-short", ["--tp", "2", "--mode", "decode",
                              "--context", "32", "--set", "WIN=64"],
     "mistral.stg"),
]


# Every shipped preset, at its full widths but with 2 layers and short
# sequences, on a mesh using every axis it can: dp, tp with sequence
# parallelism, pp, and ep for the mixtures of experts.
PRESETS = ["gpt3-175b", "llama2-7b", "llama3-8b", "llama3-70b", "llama70b",
           "llama3-405b", "mistral-7b", "mixtral-8x7b", "mixtral-8x22b",
           "deepseek-moe-16b", "deepseek-v3", "mamba-2.8b", "palm-540b",
           "qwen2.5-7b", "gemma3-27b", "jamba-1.5-mini", "qwen3-8b",
           "qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-20b", "gpt-oss-120b",
           "llama4-scout", "llama4-maverick"]
# Presets also run as inference, prefill and decode.
INFERENCE_PRESETS = ["mistral-7b", "qwen2.5-7b", "mixtral-8x7b",
                     "gemma3-27b", "jamba-1.5-mini", "qwen3-8b",
                     "qwen3-235b-a22b", "gpt-oss-120b", "llama4-scout",
                     "llama4-maverick"]
MOE_PRESETS = {"mixtral-8x7b", "mixtral-8x22b", "deepseek-moe-16b",
               "deepseek-v3", "jamba-1.5-mini", "qwen3-30b-a3b",
               "qwen3-235b-a22b", "gpt-oss-20b", "gpt-oss-120b",
               "llama4-scout", "llama4-maverick"}
# Layer patterns keep enough layers for every kind: Gemma 3's global layer
# is its sixth (and a seventh splits the stages inside the repetition),
# Jamba's attention layer its fifth of eight.
# Llama 4's NoPE layer is its fourth.
PRESET_LAYERS = {"gemma3-27b": 7, "jamba-1.5-mini": 8, "llama4-scout": 4,
                 "llama4-maverick": 4}


def preset_plans():
    for preset in PRESETS:
        layers = PRESET_LAYERS.get(preset, 2)
        flags = ["--set", f"L={layers}", "--set", "S=256", "--dp", "2",
                 "--tp", "2", "--pp", "2"]
        if preset in MOE_PRESETS:
            flags += ["--ep", "2", "--set", "B=16"]
        if preset.startswith("deepseek"):
            flags += ["--set", "LD=1"]
        yield ("preset-" + preset, flags, preset + ".stg")
    for preset in INFERENCE_PRESETS:
        for mode in ("prefill", "decode"):
            layers = PRESET_LAYERS.get(preset, 2)
            flags = ["--set", f"L={layers}", "--set", "S=256", "--tp", "2",
                     "--pp", "2", "--microbatches", "2", "--mode", mode]
            yield (f"preset-{preset}-{mode}", flags, preset + ".stg")


def run(command):
    result = subprocess.run(command, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    return result.returncode, result.stdout


def main():
    stagec, stage_et, templates, workdir = sys.argv[1:5]
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    failures = 0
    plans = MATRIX + list(preset_plans())
    for name, flags, *template in plans:
        model = os.path.join(templates, template[0] if template else
                             "llama.stg")
        sizes = SHORT if template else SMALL_LLAMA
        out = os.path.join(workdir, name)
        command = [stagec, model, "-q", "-o", out] + sizes + flags
        status, output = run(command)
        checks = [(status, output, "stagec")]
        if status == 0:
            checks.append(run([stage_et, "verify", out]) + ("stage-et verify",))
            checks.append(run([sys.executable, CHECKER, out]) +
                          ("check_trace_set.py",))
            again = out + ".again"
            status2, output2 = run([stagec, model, "-q", "-o", again] +
                                   sizes + flags)
            compare = filecmp.dircmp(out, again)
            same = status2 == 0 and not compare.diff_files and \
                not compare.left_only and not compare.right_only
            checks.append((0 if same else 1,
                           output2 + "differs: %s" % compare.diff_files,
                           "determinism"))
            shutil.rmtree(again, ignore_errors=True)
        for status, output, what in checks:
            if status != 0:
                failures += 1
                print("FAIL %s: %s\n  %s\n%s" % (name, what, " ".join(command),
                                                 output))
        if all(check[0] == 0 for check in checks):
            print("ok   %s" % name)
    if failures:
        print("%d check(s) failed" % failures)
    else:
        print("all %d plans verified" % len(plans))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
