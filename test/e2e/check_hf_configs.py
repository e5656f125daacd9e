#!/usr/bin/env python3
#===- check_hf_configs.py - Every published config in, a model out -------===#
#
# Usage: check_hf_configs.py STAGEC STAGE_SEARCH STAGE_ET CONFIGS WORKDIR
#
# For each model of ../shared/hf-configs (skips with 77 without it):
#   - stagec compiles its config.json; the parameter count (and, for MoE,
#     the count one token uses) matches the published figure: exactly where
#     a checkpoint index gives it, else the model card's rounded figure
#     (within 1 %, or as the card rounds or truncates it);
#   - `--emit-stg` writes an STG program that compiles to the same counts;
#   - a trace set on two ranks passes `stage-et verify`, with a step estimate
#     on DGX H100;
#   - MoE models decode with expert parallelism (ep 4);
#   - stage-search finds plans on 8 GPUs.
# docs/models.md has the table and says how each publisher counts.
#
#===----------------------------------------------------------------------===#

import json
import os
import shutil
import subprocess
import sys

# folder: (total, active or None, how the figure is known). An int is an
# exact count (a checkpoint index), a string a model card's rounded figure
# in billions.
PUBLISHED = {
    "Llama-2-70b-hf": (68976648192, None, "checkpoint index"),
    "Meta-Llama-3.1-8B": (8030261248, None, "checkpoint index"),
    "Meta-Llama-3.1-70B": (70553706496, None, "checkpoint index"),
    "Meta-Llama-3.1-405B": (405853388800, None, "checkpoint index"),
    "Mistral-7B-v0.1": (7241732096, None, "checkpoint index"),
    "Mixtral-8x7B-v0.1": (46702792704, "12.9", "checkpoint index; card"),
    "Qwen2.5-72B": ("72.7", None, "card"),
    "Qwen3-8B": ("8.2", None, "card"),
    "Qwen3-30B-A3B": ("30.5", "3.3", "card"),
    "Qwen3-235B-A22B": (235093634560, "22", "checkpoint index; card"),
    # The card's 2.4B active leaves out the input embedding (a lookup).
    "DeepSeek-V2-Lite": ("15.7", "2.4", "card, active without embedding"),
    # 671B without the multi-token-prediction module (14B more in the
    # checkpoint, docs/models.md).
    "DeepSeek-V3": ("671", "37", "card"),
    # The card's 5.1B active leaves out the input embedding, as V2-Lite's.
    "gpt-oss-120b": ("116.8", "5.1", "card, active without embedding"),
    "Gemma-2-9B": ("9.24", None, "card"),
    "Gemma-3-27B": ("27", None, "card, text model"),
    "Phi-3-mini-128k-instruct": ("3.8", None, "card"),
    "mamba-2.8b-hf": ("2.8", None, "card"),
    # 109B with the vision tower; the text model alone.
    "Llama-4-Scout-17B-16E-Instruct": ("108", "17", "card, text model"),
}
NO_EMBEDDING_ACTIVE = {"DeepSeek-V2-Lite", "gpt-oss-120b"}


def matches(count, published):
    """Whether `count` is the published figure: exactly for an int; for a
    card's figure in billions, within 1 % or as it rounds or truncates."""
    if isinstance(published, int):
        return count == published
    card = float(published) * 1e9
    decimals = len(published.split(".")[1]) if "." in published else 0
    unit = 10 ** (9 - decimals)
    return (abs(count - card) <= 0.01 * card or
            abs(count - card) <= unit / 2 or 0 <= count - card < unit)


def run(command, **kwargs):
    return subprocess.run(command, capture_output=True, text=True, **kwargs)


def report(stagec, model, workdir, name, extra=()):
    path = os.path.join(workdir, name + ".json")
    result = run([stagec, model, "--report-json", path, "-q", *extra])
    if result.returncode != 0:
        return None, result.stderr
    with open(path) as f:
        return json.load(f), ""


def main():
    if len(sys.argv) != 6:
        print(__doc__ if __doc__ else "usage: see the header", file=sys.stderr)
        return 2
    stagec, search, stage_et, configs, workdir = sys.argv[1:]
    if not os.path.isdir(configs):
        print(f"skipped: no {configs}")
        return 77
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    failures = []
    checked = 0
    for folder in sorted(PUBLISHED):
        config = os.path.join(configs, folder, "config.json")
        if not os.path.isfile(config):
            failures.append(f"{folder}: no config.json")
            continue
        checked += 1
        total, active, source = PUBLISHED[folder]
        base, error = report(stagec, config, workdir, folder)
        if base is None:
            failures.append(f"{folder}: stagec failed:\n{error}")
            continue
        params, used = base["parameters"], base["active_parameters"]
        line = f"{folder}: {params:,} parameters, {used:,} active ({source})"
        if not matches(params, total):
            failures.append(f"{line}: published total {total}")
        if active is not None:
            if folder in NO_EMBEDDING_ACTIVE:
                used -= base["dims"]["V"] * base["dims"]["D"]
            if not matches(used, active):
                failures.append(f"{line}: published active {active}")
        elif used != params:
            failures.append(f"{line}: a dense model's active count differs")
        print(line)

        # The written STG program is the same model.
        stg = os.path.join(workdir, folder + ".stg")
        emitted = run([stagec, config, "--emit-stg", stg])
        again, error = (report(stagec, stg, workdir, folder + "-stg")
                        if emitted.returncode == 0 else (None, emitted.stderr))
        if again is None or (again["parameters"], again["active_parameters"]) \
                != (base["parameters"], base["active_parameters"]):
            failures.append(f"{folder}: --emit-stg round trip: {error}")

        # Traces on two ranks, checked, with a step estimate.
        traces = os.path.join(workdir, folder + "-traces")
        compiled, error = report(stagec, config, workdir, folder + "-tp2",
                                 ["--tp", "2", "--system", "dgx-h100",
                                  "-o", traces])
        if compiled is None or compiled["step_estimate"] is None:
            failures.append(f"{folder}: traces with --tp 2: {error}")
        else:
            verified = run([stage_et, "verify", traces])
            if verified.returncode != 0:
                failures.append(f"{folder}: stage-et verify:\n"
                                f"{verified.stdout}{verified.stderr}")

        # MoE decode with expert parallelism.
        if used != params or active is not None:
            decoded, error = report(stagec, config, workdir, folder + "-decode",
                                    ["--mode", "decode", "--ep", "4",
                                     "--device", "H100"])
            if decoded is None:
                failures.append(f"{folder}: decode with --ep 4: {error}")

        # A plan search.
        plans = os.path.join(workdir, folder + "-plans")
        searched = run([search, config, "--gpus", "8", "--system", "dgx-h100",
                        "--global-batch", "16", "-q", "-j", "2", "-o", plans])
        if searched.returncode != 0 or not os.path.isfile(
                os.path.join(plans, "plans.json")):
            failures.append(f"{folder}: stage-search:\n{searched.stderr}")

    for failure in failures:
        print("FAIL " + failure)
    failing = len({failure.split(":")[0] for failure in failures})
    print(f"hf-configs: {checked} models checked, {failing} failing")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
