"""Checks the bytes per parameter of the three runs of memory-accounting.test."""
import json
import sys

out = sys.argv[1]


def memory(run):
    manifest = json.load(open("%s/%s/stack.manifest.json" % (out, run)))
    return manifest["rank_classes"][0]["memory"]


def per_parameter(run, kind):
    m = memory(run)
    return m[kind] / (m["weights"] / 2)  # bf16 weights: 2 bytes a parameter


checks = {
    ("megatron", "gradients"): 4, ("megatron", "optimizer"): 12,
    ("zero", "gradients"): 2, ("zero", "optimizer"): 12,
    ("zero1", "gradients"): 4, ("zero1", "optimizer"): 12 / 4,
}
for (run, kind), expected in checks.items():
    got = per_parameter(run, kind)
    assert abs(got - expected) < 1e-9, (run, kind, got, expected)
print("ok")
