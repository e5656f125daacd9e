"""Reads a rank's JSON trace and prints how its compute of one op type
(argument 2: einsum, the default, or attention) sits with the all-gathers
and reduce-scatters: how many such nodes wait for a gather, and whether a
node after waits for one of them and a collective that run side by side
(they share their inputs, or the collective reduces the node's result)."""
import json
import sys

nodes = {node["id"]: node for node in json.load(open(sys.argv[1]))["nodes"]}
partner = sys.argv[2] if len(sys.argv) > 2 else "einsum"
ALL_GATHER, REDUCE_SCATTER = 2, 7


def kind(node):
    if node["type"] == "COMM_COLL_NODE":
        return {ALL_GATHER: "gather", REDUCE_SCATTER: "scatter"}.get(
            node["attr"]["comm_type"], "other")
    if node["type"] == "COMP_NODE" and node["attr"]["op_type"].startswith(
            partner):
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
print("%s waiting for a gather: %d" % (partner, waits))
print("nodes after %s beside its collective: %s" % (partner, "yes" if beside else "no"))
