#!/usr/bin/env python3
#===- megatron_table1.py - stagec against Megatron-LM 2021, Table 1 -------===#
#
# Usage: megatron_table1.py STAGEC TEMPLATES TABLE_CSV [--max-error F]
#
# For each run of Narayanan et al. 2021 (SC'21), Table 1, as the shared CSV
# gives it (A100 DGX nodes, GPT models, fp16, full recomputation, sequence
# 2048, vocabulary 51200, interleaved 1F1B where a run has virtual stages,
# dropout of 0.1 on the attention probabilities and after attention and MLP,
# no sequence parallelism (it came in 2022), data-parallel reductions after
# the backward pass (Megatron-LM's default),
# and the attention of 2021: unfused, scores through memory; the shipped
# GPT template is copied with those changes),
# compiles the same model and plan for `--system dgx-a100`, takes the
# estimated step and computes TFLOP/s per GPU with the paper's formula
# 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) / (step x GPUs). Prints a Markdown
# table (docs/validation.md) and, with --max-error, exits 1 if any run is
# further from the measured figure than that fraction. Exits 77 without the
# table.
#
#===----------------------------------------------------------------------===#

import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile


def paper_flops(batch, seq, layers, hidden, vocab):
    return 96 * batch * seq * layers * hidden ** 2 * (
        1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))


def rows(path):
    with open(path) as f:
        lines = [line for line in f if not line.startswith("#")]
    return list(csv.DictReader(lines))


def estimated_step_seconds(report):
    """The estimated step of a `stagec --report` text, in seconds, or None
    if it has none."""
    match = re.search(r"estimated step: ([0-9.]+) (ms|s)\b", report)
    if not match:
        return None
    return float(match.group(1)) / (1000 if match.group(2) == "ms" else 1)


def read_run(row):
    """A run of the table as numbers: degrees, GPUs, micro-batch and global
    batch, the model's shape, and its model chunks per stage."""
    run = {key: int(row[column]) for key, column in (
        ("tp", "tensor_parallel"), ("pp", "pipeline_parallel"),
        ("dp", "data_parallel"), ("gpus", "gpus"), ("micro", "micro_batch"),
        ("batch", "global_batch"), ("layers", "layers"),
        ("hidden", "hidden"), ("heads", "heads"))}
    per_chunk = row["layers_per_virtual_stage"]
    run["chunks"] = (run["layers"] // (run["pp"] * int(per_chunk))
                     if per_chunk else 1)
    return run


def make_2021_templates(templates, scratch):
    """Copies `templates` into `scratch` with the GPT model of 2021: the
    unfused attention kernel and dropout of 0.1 on the attention
    probabilities and after attention and MLP. Returns the copy's path."""
    shutil.copytree(templates, os.path.join(scratch, "templates"))
    templates = os.path.join(scratch, "templates")
    mha = os.path.join(templates, "nn", "mha.stg")
    text = open(mha).read()
    assert "attention[causal]" in text
    open(mha, "w").write(text.replace(
        "attention[causal]",
        "attention[mask=causal, kernel=unfused, dropout=1/10]"))
    gpt = os.path.join(templates, "gpt.stg")
    text = open(gpt).read()
    for block in ("mha(layer_norm(x))", "gelu_mlp(layer_norm(x1))"):
        assert block in text
        text = text.replace(block, "dropout(%s)" % block)
    open(gpt, "w").write(text)
    return templates


def main():
    stagec, templates, table = sys.argv[1:4]
    max_error = None
    if "--max-error" in sys.argv:
        max_error = float(sys.argv[sys.argv.index("--max-error") + 1])
    if not os.path.exists(table):
        print("skipped: no " + table)
        return 77
    seq, vocab = 2048, 51200
    scratch = tempfile.mkdtemp(prefix="megatron-table1-")
    templates = make_2021_templates(templates, scratch)
    print("| model | GPUs | t, p, d | micro-batch, batch | measured TFLOP/s | "
          "stagec step (s) | stagec TFLOP/s | error |")
    print("|---|---|---|---|---|---|---|---|")
    failures = 0
    for row in rows(table):
        run = read_run(row)
        t, p, d = run["tp"], run["pp"], run["dp"]
        gpus, micro, batch = run["gpus"], run["micro"], run["batch"]
        layers, hidden, heads = run["layers"], run["hidden"], run["heads"]
        microbatches = batch // (d * micro)
        flags = ["--tp", str(t), "--pp", str(p), "--dp", str(d),
                 "--microbatches", str(microbatches), "--recompute", "full",
                 "--dtype", "fp16", "--system", "dgx-a100", "--report",
                 "--set", "MB=%d" % micro, "--set", "S=%d" % seq,
                 "--set", "D=%d" % hidden, "--set", "NH=%d" % heads,
                 "--set", "L=%d" % layers, "--set", "V=%d" % vocab,
                 "--set", "sequence_parallel=false",
                 "--grad-reduce", "after-backward"]
        if run["chunks"] > 1:
            flags += ["--virtual-stages", str(run["chunks"])]
        result = subprocess.run([stagec, os.path.join(templates, "gpt.stg"),
                                 "-I", templates] + flags, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        step = estimated_step_seconds(result.stdout)
        if result.returncode != 0 or step is None:
            failures += 1
            print("| %s | %d | %d, %d, %d | | %s | failed | | |" %
                  (row["name"], gpus, t, p, d, row["measured_tflops_per_gpu"]))
            sys.stderr.write(result.stdout[-2000:])
            continue
        tflops = paper_flops(batch, seq, layers, hidden, vocab) / (
            step * gpus) / 1e12
        measured = float(row["measured_tflops_per_gpu"])
        error = tflops / measured - 1
        if max_error is not None and abs(error) > max_error:
            failures += 1
        print("| %s | %d | %d, %d, %d | %d, %d | %.0f | %.2f | %.0f | %+.0f %% |"
              % (row["name"], gpus, t, p, d, micro, batch, measured, step,
                 tflops, 100 * error))
    shutil.rmtree(scratch, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
