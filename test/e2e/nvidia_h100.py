#!/usr/bin/env python3
#===- nvidia_h100.py - stagec against NVIDIA's published H100 runs -------===#
#
# Usage: nvidia_h100.py STAGEC TEMPLATES HF_CONFIGS TABLE_CSV [--max-error F]
#                       [--max-moe-error F] [--only NAME]
#
# For each row of ../shared/validation/nvidia-h100.csv (NeMo 24.07 and
# Megatron-Bridge 25.11 pre-training runs on DGX-H100), compiles the same
# model and plan for `--system dgx-h100` with the row's recipe (FP8 or
# BF16, the distributed optimizer or Megatron-FSDP, the recipes' overlaps;
# docs/validation.md says where each setting was read), takes the
# estimated step and compares tokens/s per GPU, GBS x seq / (step x GPUs),
# with the measured figure. The Qwen3 and GPT-OSS rows compile the
# published Hugging Face configs. A table may name each row's `system`
# (docs/data/megatron-bridge-blackwell.csv: the same recipes on Blackwell,
# which the constants were not fitted on). Prints a Markdown table and, with
# --max-error, exits 1 if any dense row is further off than that fraction
# (MoE rows, with ep above 1: --max-moe-error, none without). Exits 77
# without the table.
#
#===----------------------------------------------------------------------===#

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from megatron_table1 import estimated_step_seconds, rows  # noqa: E402

# The model of each row: a template or a config.json, and `--set`s. GPT-3's
# vocabulary is padded as Megatron pads it (to a multiple of 128 x tp).
MODELS = {
    "GPT3-5B": ("gpt.stg", {"L": 24, "D": 4096, "NH": 32, "V": 50304}),
    "GPT3-20B": ("gpt.stg", {"L": 44, "D": 6144, "NH": 48, "V": 50432}),
    "GPT3-175B": ("gpt3-175b.stg", {"V": 50688}),
    "LLAMA2-7B": ("llama2-7b.stg", {}),
    "LLAMA2-13B": ("llama.stg", {"D": 5120, "F": 13824, "NH": 40, "KVH": 40,
                                 "L": 40, "V": 32000}),
    "LLAMA2-70B": ("hf:Llama-2-70b-hf", {}),
    "Nemotron-340B": ("nemotron4-340b.stg", {}),
    "LLAMA3-8B": ("llama3-8b.stg", {}),
    "LLAMA3_8B": ("llama3-8b.stg", {}),
    "LLAMA3-70B": ("llama3-70b.stg", {}),
    "LLAMA3_70B": ("llama3-70b.stg", {}),
    "LLAMA3.1_405B": ("llama3-405b.stg", {}),
    "GPT_OSS_120B": ("hf:gpt-oss-120b", {}),
    "Qwen3_30B_a3B": ("hf:Qwen3-30B-A3B", {}),
    "Qwen3_235B_a22B": ("hf:Qwen3-235B-A22B", {}),
}


# Settings of a row's recipe beyond the table's columns (docs/validation.md
# cites the recipe files): Megatron-Bridge's 405B and Qwen3-235B recipes
# count the embedding and the loss as pipeline layers.
RECIPES = {
    ("MB25.11", "LLAMA3.1_405B"): [
        "--account-for-embedding-in-pipeline-split",
        "--account-for-loss-in-pipeline-split"],
    ("MB25.11", "Qwen3_235B_a22B"): [
        "--account-for-embedding-in-pipeline-split",
        "--account-for-loss-in-pipeline-split"],
}


def plan_flags(row):
    """stagec's flags for a row's plan and recipe."""
    n = {key: int(row[key]) for key in (
        "gpus", "global_batch", "micro_batch", "seq", "fsdp", "tp", "pp",
        "cp", "vp", "ep")}
    # Megatron's data parallelism counts the expert-parallel ranks; stagec's
    # dp and ep are separate axes of the batch.
    dp_all = n["gpus"] // (n["tp"] * n["pp"] * n["cp"])
    # Megatron's expert parallelism wider than dp folds over tp x dp (MoE
    # parallel folding, experts whole on each rank): stagec's ep is a batch
    # axis beside tp, and `moe[folded = true]` splits the experts over
    # ep x tp (model_path writes it).
    folded = n["ep"] > dp_all
    ep = n["ep"] // n["tp"] if folded else n["ep"]
    dp = dp_all // ep
    microbatches = n["global_batch"] // (n["micro_batch"] * dp_all)
    flags = ["--tp", str(n["tp"]), "--pp", str(n["pp"]), "--cp", str(n["cp"]),
             "--ep", str(ep), "--dp", str(dp),
             "--microbatches", str(microbatches),
             "--set", "MB=%d" % n["micro_batch"], "--set", "S=%d" % n["seq"],
             "--system", row.get("system") or "dgx-h100", "--report"]
    if n["vp"] > 1:
        flags += ["--virtual-stages", str(n["vp"])]
    flags += ["--fsdp"] if n["fsdp"] else ["--distributed-optimizer"]
    flags += ["--precision", {"BF16": "bf16", "FP8-MX": "mxfp8"}.get(
        row["precision"], "fp8")]
    flags += RECIPES.get((row["source"], row["model"]), [])
    return flags, n, folded


def model_path(stagec, name, templates, configs, folded, scratch):
    """The model's file and `--set` flags; with `folded`, the imported STG
    with its experts folded over ep x tp, as a user would edit it."""
    source, sets = MODELS[name]
    if source.startswith("hf:"):
        path = os.path.join(configs, source[3:], "config.json")
    else:
        path = os.path.join(templates, source)
    if folded:
        text = subprocess.run([stagec, path, "-I", templates, "--emit-stg",
                               "-"], stdout=subprocess.PIPE, text=True,
                              check=True).stdout
        assert "moe(" in text or "moe[" in text
        text = text.replace("moe[", "moe[folded = true, ").replace(
            "moe(", "moe[folded = true](")
        path = os.path.join(scratch, name + "-folded.stg")
        with open(path, "w") as f:
            f.write(text)
    flags = []
    for key, value in sets.items():
        flags += ["--set", "%s=%s" % (key, value)]
    return path, flags


def main():
    stagec, templates, configs, table = sys.argv[1:5]
    def option(name):
        if name not in sys.argv:
            return None
        return sys.argv[sys.argv.index(name) + 1]
    max_error = option("--max-error")
    max_moe_error = option("--max-moe-error")
    only = option("--only")
    if not os.path.exists(table):
        print("skipped: no " + table)
        return 77
    scratch = tempfile.mkdtemp(prefix="nvidia-h100-")
    print("| source | model | GPUs | precision | tp, pp, cp, vp, ep | "
          "measured tokens/s/GPU | stagec step (s) | stagec tokens/s/GPU "
          "| error |")
    print("|---|---|---|---|---|---|---|---|---|")
    failures = 0
    for row in rows(table):
        name = row["model"]
        if only and name != only:
            continue
        flags, n, folded = plan_flags(row)
        path, model_flags = model_path(stagec, name, templates, configs,
                                       folded, scratch)
        command = [stagec, path, "-I", templates] + model_flags + flags
        result = subprocess.run(command, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        step = estimated_step_seconds(result.stdout)
        plan = "%d, %d, %d, %d, %d" % (n["tp"], n["pp"], n["cp"], n["vp"],
                                       n["ep"])
        measured = float(row["tokens_per_s_per_gpu"])
        source = row["source"] + (", " + row["system"] if row.get("system")
                                  else "")
        if result.returncode != 0 or step is None:
            failures += 1
            print("| %s | %s | %d | %s | %s | %.0f | failed | | |" % (
                source, name, n["gpus"], row["precision"], plan,
                measured))
            sys.stderr.write(" ".join(command) + "\n" +
                             result.stdout[-1500:] + "\n")
            continue
        tokens = n["global_batch"] * n["seq"] / (step * n["gpus"])
        error = tokens / measured - 1
        bound = max_moe_error if n["ep"] > 1 else max_error
        if bound is not None and abs(error) > float(bound):
            failures += 1
        print("| %s | %s | %d | %s | %s | %.0f | %.2f | %.0f | %+.0f %% |" % (
            source, name, n["gpus"], row["precision"], plan, measured,
            step, tokens, 100 * error))
    shutil.rmtree(scratch, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
