"""Checks a workload_card.yaml against CCL-Bench's schema and expected values.

Usage: check_card.py CARD.yaml [dotted.key=VALUE ...]

Every field of CCL-Bench's workload_card_template.yaml must be present
(null where stagec cannot know it); each VALUE is read as YAML (`8`,
`null`, `[400, 3600]`, `training`) and must equal the card's field. Prints
`ok`.
"""
import sys

import yaml

# The template's fields, as dotted paths (appendix B of the CCL-Bench paper).
SCHEMA = """
version description hf_url trace_url contributor contact
workload.model.phase workload.model.moe workload.model.granularity
workload.model.model_family workload.model.precision workload.model.epochs
workload.model.iteration workload.model.model_arch.num_params
workload.model.model_arch.num_params_embedding
workload.model.model_arch.num_layers workload.model.model_arch.num_heads
workload.model.model_arch.head_dim
workload.data.batch_size workload.data.seq_len workload.data.dataset
workload.hardware.network_topo.topology
workload.hardware.network_topo.bandwidth_gbps
workload.hardware.xpu_spec.type workload.hardware.xpu_spec.model
workload.hardware.xpu_spec.total_count
workload.hardware.xpu_spec.count_per_node workload.hardware.driver_version
Model-executor.framework.name Model-executor.framework.compiler_tool_selection
Model-executor.model_plan_parallelization.dp_replicate
Model-executor.model_plan_parallelization.dp_shard
Model-executor.model_plan_parallelization.tp
Model-executor.model_plan_parallelization.pp
Model-executor.model_plan_parallelization.cp
Model-executor.model_plan_parallelization.ep
Model-executor.model_plan_parallelization.pp_mb
Model-executor.communication_library.name
Model-executor.protocol_selection
metric_source.traces metric_source.metrics_specific_trace
""".split()


def lookup(card, path):
    node = card
    for key in path.split("."):
        assert isinstance(node, dict) and key in node, "missing %s" % path
        node = node[key]
    return node


def main():
    with open(sys.argv[1]) as f:
        card = yaml.safe_load(f)
    for path in SCHEMA:
        lookup(card, path)
    for check in sys.argv[2:]:
        path, expected = check.split("=", 1)
        got = lookup(card, path)
        assert got == yaml.safe_load(expected), \
            "%s: %r, expected %s" % (path, got, expected)
    print("ok")


if __name__ == "__main__":
    main()
