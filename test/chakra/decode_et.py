#!/usr/bin/env python3
#===- decode_et.py - Decode Chakra .et files independently of stagec -------===#
#
# Usage: decode_et.py [--schema PROTO]... [--protoc PROTOC] [--nodes] FILE...
#
# Reads Chakra execution traces without any of stagec's C++: the Python
# classes come from running `protoc --python_out` on a schema into a
# temporary directory (the first --schema that exists; by default
# ../shared/chakra/et_def.proto beside the repository, that is the reference
# MLCommons copy, else the project's proto/et_def.proto), and the framing
# (a varint32 length before every message) is decoded here by hand, the way
# Chakra's protolib.decodeMessage does. Gzipped files are recognized by
# their magic bytes 1f 8b.
#
# Prints a JSON object per file (an array of them for several files): the
# metadata, node counts by type and, with --nodes, every node with each
# attribute as {"member": value}, the member being the AttributeProto oneof
# field the value was stored in. Exits 1 with a message on a malformed file.
#
# Needs Debian's python3-protobuf (the `google.protobuf` module).
#
#===----------------------------------------------------------------------===#

import argparse
import gzip
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_SCHEMAS = [
    os.path.join(os.path.dirname(REPO), "shared", "chakra", "et_def.proto"),
    os.path.join(REPO, "proto", "et_def.proto"),
]


class DecodeError(Exception):
    pass


def load_schema(schemas, protoc, tmpdir):
    """Compiles the first existing schema to Python and imports it."""
    for schema in schemas:
        if os.path.isfile(schema):
            break
    else:
        raise DecodeError("no schema found among: " + ", ".join(schemas))
    schema = os.path.abspath(schema)
    subprocess.run([protoc, "--proto_path=" + os.path.dirname(schema),
                    "--python_out=" + tmpdir, schema], check=True)
    sys.path.insert(0, tmpdir)
    module = os.path.splitext(os.path.basename(schema))[0] + "_pb2"
    return importlib.import_module(module), schema


def read_varint32(data, pos):
    """Decodes a base-128 varint at data[pos:]; returns (value, next pos).
    Like protobuf's ReadVarint32, keeps the low 32 bits of a longer one."""
    result = 0
    shift = 0
    while True:
        if pos >= len(data):
            raise DecodeError("truncated length prefix")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result & 0xFFFFFFFF, pos
        shift += 7
        if shift >= 70:
            raise DecodeError("malformed length prefix")


def frames(data):
    """Yields (offset, payload) for each length-prefixed message."""
    pos = 0
    while pos < len(data):
        start = pos
        length, pos = read_varint32(data, pos)
        if pos + length > len(data):
            raise DecodeError("message at byte %d claims %d bytes, %d left" %
                              (start, length, len(data) - pos))
        yield start, data[pos:pos + length]
        pos += length


def attr_value(pb, attr):
    member = attr.WhichOneof("value")
    if member is None:
        return {}
    value = getattr(attr, member)
    if member.endswith("_list"):
        value = list(value.values)
    if member in ("bytes_val",):
        value = value.hex()
    return {member: value}


def decode(path, pb):
    with open(path, "rb") as f:
        data = f.read()
    is_gzip = data[:2] == b"\x1f\x8b"
    if is_gzip:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise DecodeError("bad gzip stream: %s" % e)
    messages = frames(data)
    try:
        _, first = next(messages)
    except StopIteration:
        raise DecodeError("empty file: no GlobalMetadata")
    metadata = pb.GlobalMetadata()
    metadata.ParseFromString(first)
    if not metadata.version:
        raise DecodeError("the first message is not a GlobalMetadata")
    nodes = []
    counts = {}
    for offset, payload in messages:
        node = pb.Node()
        try:
            node.ParseFromString(payload)
        except Exception as e:  # google.protobuf.message.DecodeError
            raise DecodeError("node at byte %d does not parse: %s" %
                              (offset, e))
        type_name = pb.NodeType.Name(node.type)
        counts[type_name] = counts.get(type_name, 0) + 1
        nodes.append({
            "id": node.id,
            "name": node.name,
            "type": type_name,
            "data_deps": list(node.data_deps),
            "ctrl_deps": list(node.ctrl_deps),
            "duration_micros": node.duration_micros,
            "attr": {a.name: attr_value(pb, a) for a in node.attr},
        })
    return {
        "gzip": is_gzip,
        "metadata": {
            "version": metadata.version,
            "attr": {a.name: attr_value(pb, a) for a in metadata.attr},
        },
        "num_nodes": len(nodes),
        "node_types": dict(sorted(counts.items())),
        "nodes": nodes,
    }


def main():
    parser = argparse.ArgumentParser(
        description="Decode Chakra .et files and print a JSON summary.")
    parser.add_argument("--schema", action="append",
                        help="schema to compile (first existing one wins)")
    parser.add_argument("--protoc", default=shutil.which("protoc") or "protoc")
    parser.add_argument("--nodes", action="store_true",
                        help="print every node, not only the counts")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()

    tmpdir = tempfile.mkdtemp(prefix="decode_et-")
    try:
        pb, schema = load_schema(args.schema or DEFAULT_SCHEMAS, args.protoc,
                                 tmpdir)
        status = 0
        summaries = []
        for path in args.files:
            try:
                summary = decode(path, pb)
            except (DecodeError, OSError) as e:
                print("%s: error: %s" % (path, e), file=sys.stderr)
                status = 1
                continue
            if not args.nodes:
                del summary["nodes"]
            summaries.append({"file": path, "schema": schema, **summary})
        if summaries:
            output = summaries[0] if len(args.files) == 1 else summaries
            print(json.dumps(output, indent=2))
        return status
    except DecodeError as e:
        print("decode_et: error: %s" % e, file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
