#!/usr/bin/env python3
#===- check_trace_set.py - Check a stagec output independently ------------===#
#
# Usage: check_trace_set.py [--schema PROTO]... [--protoc PROTOC] DIR
#
# Reads every P.{rank}.et[.gz] in DIR and the comm-group file P.json with
# decode_et.py (protobuf classes generated from the reference schema, the
# framing decoded by hand), never with stagec's C++, and checks the output
# contract of docs/chakra-output.md:
#   per file   GlobalMetadata first; unique ids; every dependency names an
#              earlier node (so the order is topological and acyclic); the
#              attributes each node type must carry, with the right
#              AttributeProto member; is_cpu_op false;
#   per group  at least two members; every member issues the same sequence
#              of collectives (type, size) on it, and each collective depends
#              (transitively) on the member's previous one on that group;
#   pipeline   every SEND (src, dst, tag, size) has exactly one RECV on dst,
#              and every RECV one SEND.
# Prints one line per problem (at most 20 per kind) and a summary; exits 1 if
# any check fails.
#
#===----------------------------------------------------------------------===#

import argparse
import collections
import json
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_et  # noqa: E402

COLLECTIVES = {0: "ALL_REDUCE", 2: "ALL_GATHER", 6: "ALL_TO_ALL",
               7: "REDUCE_SCATTER"}
REQUIRED = {
    "COMP_NODE": {"num_ops": "int64_val", "tensor_size": "uint64_val",
                  "op_type": "string_val"},
    "COMM_COLL_NODE": {"comm_type": "int64_val", "comm_size": "int64_val",
                       "pg_name": "string_val"},
    "COMM_SEND_NODE": {"comm_src": "int32_val", "comm_dst": "int32_val",
                       "comm_tag": "int32_val", "comm_size": "int64_val"},
}
REQUIRED["COMM_RECV_NODE"] = REQUIRED["COMM_SEND_NODE"]


class Problems:
    def __init__(self):
        self.counts = collections.Counter()

    def add(self, kind, message):
        self.counts[kind] += 1
        if self.counts[kind] <= 20:
            print("error: %s" % message)

    def total(self):
        return sum(self.counts.values())


def value(node, name):
    attr = node["attr"].get(name, {})
    return next(iter(attr.values())) if attr else None


def reaches(nodes_by_id, start, target):
    """True if node `start` depends on `target` through data or ctrl deps."""
    stack, seen = [start], set()
    while stack:
        current = stack.pop()
        for dep in nodes_by_id[current]["data_deps"] + \
                nodes_by_id[current]["ctrl_deps"]:
            if dep == target:
                return True
            if dep > target and dep not in seen:  # ids are topological
                seen.add(dep)
                stack.append(dep)
    return False


def check_file(rank, path, trace, groups, problems, sequences, messages):
    nodes = trace["nodes"]
    by_id = {}
    for node in nodes:
        where = "%s: node %d '%s'" % (path, node["id"], node["name"])
        if node["id"] in by_id:
            problems.add("ids", where + ": duplicate id")
        for dep in node["data_deps"] + node["ctrl_deps"]:
            if dep not in by_id:
                problems.add("deps", where + ": dependency %d is not an "
                             "earlier node" % dep)
        by_id[node["id"]] = node
        if node["attr"].get("is_cpu_op") != {"bool_val": False}:
            problems.add("attrs", where + ": is_cpu_op must be bool false")
        for name, member in REQUIRED.get(node["type"], {}).items():
            if member not in node["attr"].get(name, {}):
                problems.add("attrs", where + ": needs %s as %s" %
                             (name, member))
        if node["type"] == "COMM_COLL_NODE":
            group = value(node, "pg_name")
            if group not in groups or rank not in groups[group]:
                problems.add("groups", where + ": rank %d is not in group "
                             "'%s'" % (rank, group))
                continue
            kind = value(node, "comm_type")
            if kind not in COLLECTIVES:
                problems.add("attrs", where + ": comm_type %s is not one "
                             "ASTRA-sim simulates" % kind)
            sequence = sequences[group].setdefault(rank, [])
            if sequence and not reaches(by_id, node["id"], sequence[-1][2]):
                problems.add("order", where + ": not ordered after the "
                             "previous collective on group %s" % group)
            sequence.append((kind, value(node, "comm_size"), node["id"]))
        elif node["type"] in ("COMM_SEND_NODE", "COMM_RECV_NODE"):
            src, dst = value(node, "comm_src"), value(node, "comm_dst")
            own = src if node["type"] == "COMM_SEND_NODE" else dst
            if own != rank:
                problems.add("p2p", where + ": %s must be this rank" %
                             ("comm_src" if own is src else "comm_dst"))
            key = (src, dst, value(node, "comm_tag"), value(node, "comm_size"))
            messages[node["type"]][key] += 1


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--schema", action="append")
    parser.add_argument("--protoc", default=shutil.which("protoc") or "protoc")
    parser.add_argument("directory")
    args = parser.parse_args()

    traces = {}
    for name in os.listdir(args.directory):
        match = re.fullmatch(r"(.+)\.(\d+)\.et(\.gz)?", name)
        if match:
            traces[int(match.group(2))] = (match.group(1), name)
    if not traces:
        print("error: no .et files in %s" % args.directory)
        return 1
    prefix = traces[min(traces)][0]
    with open(os.path.join(args.directory, prefix + ".json")) as f:
        groups = {key: set(members) for key, members in json.load(f).items()}

    problems = Problems()
    for key, members in sorted(groups.items()):
        if len(members) < 2:
            problems.add("groups", "group %s has %d member" % (key,
                                                                len(members)))
    sequences = collections.defaultdict(dict)
    messages = {"COMM_SEND_NODE": collections.Counter(),
                "COMM_RECV_NODE": collections.Counter()}
    tmpdir = tempfile.mkdtemp(prefix="check_trace_set-")
    num_nodes = 0
    try:
        pb, _ = decode_et.load_schema(args.schema or decode_et.DEFAULT_SCHEMAS,
                                      args.protoc, tmpdir)
        for rank in sorted(traces):
            path = os.path.join(args.directory, traces[rank][1])
            try:
                trace = decode_et.decode(path, pb)
            except decode_et.DecodeError as e:
                problems.add("decode", "%s: %s" % (path, e))
                continue
            num_nodes += trace["num_nodes"]
            check_file(rank, path, trace, groups, problems, sequences,
                       messages)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)

    for group, by_rank in sorted(sequences.items()):
        expected = None
        for rank, sequence in sorted(by_rank.items()):
            issued = [(kind, size) for kind, size, _ in sequence]
            if expected is None:
                expected = (rank, issued)
            elif issued != expected[1]:
                problems.add("groups", "group %s: rank %d issues %d "
                             "collectives, rank %d %d, or they differ in "
                             "type or size" % (group, rank, len(issued),
                                               expected[0], len(expected[1])))
        missing = groups[group] - set(by_rank) if group in groups else set()
        if missing:
            problems.add("groups", "group %s: members %s issue nothing on it"
                         % (group, sorted(missing)))
    sends, recvs = messages["COMM_SEND_NODE"], messages["COMM_RECV_NODE"]
    for key in sorted(set(sends) | set(recvs), key=str):
        if sends[key] != 1 or recvs[key] != 1:
            problems.add("p2p", "message (src, dst, tag, size) = %s: %d "
                         "send(s), %d recv(s)" % (key, sends[key], recvs[key]))

    if problems.total():
        print("%s: %d problem(s) in %d files" % (args.directory,
                                                  problems.total(),
                                                  len(traces)))
        return 1
    print("%s: %d files, %d nodes, %d groups, %d messages: ok" %
          (args.directory, len(traces), num_nodes, len(groups), len(sends)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
