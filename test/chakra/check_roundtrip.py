#!/usr/bin/env python3
#===- check_roundtrip.py - stagec's writer against an independent reader ---===#
#
# Usage: check_roundtrip.py FIXTURE PROTOC EXPECTED_JSON WORK_DIR SCHEMA...
#
# Runs the chakra-roundtrip-fixture program, which writes one fixed trace
# through ChakraTraceWriter as WORK_DIR/fixture.0.et and, gzipped, as
# WORK_DIR/fixture.0.et.gz; decodes both with decode_et.py from the first
# SCHEMA that exists (the reference MLCommons schema when ../shared is
# there, else the project's); and compares the node count, every node and
# every attribute (value and AttributeProto member) with EXPECTED_JSON.
#
#===----------------------------------------------------------------------===#

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    if len(sys.argv) < 6:
        sys.exit("usage: check_roundtrip.py FIXTURE PROTOC EXPECTED_JSON "
                 "WORK_DIR SCHEMA...")
    fixture, protoc, expected_path, work = sys.argv[1:5]
    schemas = sys.argv[5:]
    os.makedirs(work, exist_ok=True)
    plain = os.path.join(work, "fixture.0.et")
    gzipped = os.path.join(work, "fixture.0.et.gz")
    subprocess.run([fixture, plain, gzipped], check=True)

    command = [sys.executable, os.path.join(HERE, "decode_et.py"),
               "--protoc", protoc, "--nodes"]
    for schema in schemas:
        command += ["--schema", schema]
    decoded = json.loads(subprocess.run(command + [plain, gzipped],
                                        check=True, stdout=subprocess.PIPE,
                                        text=True).stdout)
    with open(expected_path) as f:
        expected = json.load(f)

    failures = []
    for summary, want_gzip in zip(decoded, (False, True)):
        name = summary["file"]
        print("%s: %d nodes, decoded with %s" %
              (name, summary["num_nodes"], summary["schema"]))
        if summary["gzip"] != want_gzip:
            failures.append("%s: gzip is %s" % (name, summary["gzip"]))
        for key in ("metadata", "num_nodes", "node_types"):
            if summary[key] != expected[key]:
                failures.append("%s: %s is %s, expected %s" %
                                (name, key, summary[key], expected[key]))
        for got, want in zip(summary["nodes"], expected["nodes"]):
            # Attributes one by one, so that a failure names the attribute.
            fields = [(key, got.get(key), want.get(key))
                      for key in sorted(set(got) | set(want)) if key != "attr"]
            got_attr, want_attr = got.get("attr", {}), want.get("attr", {})
            fields += [("attribute " + key, got_attr.get(key),
                        want_attr.get(key))
                       for key in sorted(set(got_attr) | set(want_attr))]
            for key, got_value, want_value in fields:
                if got_value != want_value:
                    failures.append("%s: node %s: %s is %s, expected %s" %
                                    (name, want["id"], key, got_value,
                                     want_value))
    if failures:
        print("\n".join(failures))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
