"""Reads a rank's JSON trace and prints how its GEMMs sit with the
tensor-parallel all-gathers and reduce-scatters: how many GEMMs wait for a
gather, how many run beside one (a gather and the GEMM share their
inputs, and a node after waits for both), and the same for reduce-
scatters of a GEMM's result."""
import json
import sys

nodes = {node["id"]: node for node in json.load(open(sys.argv[1]))["nodes"]}
ALL_GATHER, REDUCE_SCATTER = 2, 7


def kind(node):
    if node["type"] == "COMM_COLL_NODE":
        return {ALL_GATHER: "gather", REDUCE_SCATTER: "scatter"}.get(
            node["attr"]["comm_type"], "other")
    if node["type"] == "COMP_NODE" and node["attr"]["op_type"] == "einsum":
        return "gemm"
    return "other"


waits = beside = 0
for node in nodes.values():
    deps = [nodes[d] for d in node["data_deps"]]
    if kind(node) == "gemm":
        waits += any(kind(d) == "gather" for d in deps)
    # A node after a pair waits for a GEMM and a collective that started
    # from the same inputs.
    gemms = [d for d in deps if kind(d) == "gemm"]
    colls = [d for d in deps if kind(d) in ("gather", "scatter")]
    beside += any(set(g["data_deps"]) & set(c["data_deps"]) or
                  g["id"] in c["data_deps"] for g in gemms for c in colls)
print("gemms waiting for a gather: %d" % waits)
print("nodes after a gemm beside its collective: %s" % ("yes" if beside else "no"))
