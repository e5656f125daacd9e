"""Where a rank's weight gathers (`*.next.allgather`) sit in its program.

Reads a `--format json` rank file and prints its first nodes, the last
gather, how many gathers come before the first compute node, and which
gather (if any) the micro-batches' first forward ops wait for.
"""
import json
import sys

nodes = json.load(open(sys.argv[1]))["nodes"]
by_id = {node["id"]: node for node in nodes}
gathers = [n for n in nodes if n["name"].endswith(".next.allgather")]
first_compute = next(i for i, n in enumerate(nodes) if n["type"] == "COMP_NODE")
print("first nodes:", ", ".join(n["name"] for n in nodes[:3]))
print("last gather:", gathers[-1]["name"] if gathers else "none")
print(f"gathers before the first compute: "
      f"{sum(1 for n in nodes[:first_compute] if n in gathers)} of {len(gathers)}")
# Without the overlap, the gathers wait for the last optimizer step of all.
adams = [n for n in nodes if n.get("type") == "COMP_NODE" and
         n["name"].endswith(".next.shard")]
if gathers and adams and gathers[0]["id"] > adams[-1]["id"]:
    first = gathers[0]
    waits = adams[-1]["id"] in first.get("data_deps", []) + first.get("ctrl_deps", [])
    print("first gather waits for the last optimizer step:", waits)
for name in ("embedding.e.mb0", "lm_head.logits.mb0", "embedding.e.mb1"):
    node = next(n for n in nodes if n["name"] == name)
    waits = [by_id[d]["name"] for d in node.get("data_deps", []) + node.get("ctrl_deps", [])
             if by_id[d]["name"].endswith(".next.allgather")]
    print(name, "waits for", ", ".join(waits) if waits else "no gather")
