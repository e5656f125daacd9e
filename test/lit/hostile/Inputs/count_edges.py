"""Prints 'NODES EDGES' of a stagec --format json rank file."""
import json
import sys

nodes = json.load(open(sys.argv[1]))["nodes"]
edges = sum(len(n["data_deps"]) + len(n["ctrl_deps"]) for n in nodes)
print(len(nodes), edges)
