#!/usr/bin/env python3
#===- check_schema_compat.py - Compare two Chakra schemas for wire compat --===#
#
# Usage: check_schema_compat.py PROTOC PROJECT_PROTO REFERENCE_PROTO
#
# Compiles both .proto files with `protoc --descriptor_set_out` (no source
# info, so comments and layout do not count) and compares what the wire
# format, the generated APIs and the JSON/text forms depend on: the syntax
# and package; every message, by full name, with its fields (name, number,
# type, label, type_name, oneof and proto3-optional) and oneofs; every enum
# with its values (name, number); services and file options are compared as
# well, in case either file grows them. Declaration order does not matter.
#
# Exits 0 when they agree, 1 listing every difference, and 77 (ctest's
# SKIP_RETURN_CODE) when REFERENCE_PROTO does not exist: the reference lives
# outside the repository (../shared/chakra), which a plain checkout lacks.
#
#===----------------------------------------------------------------------===#

import os
import subprocess
import sys
import tempfile

SKIP = 77


def load(protoc, proto, tmpdir, tag):
    from google.protobuf import descriptor_pb2
    out = os.path.join(tmpdir, tag + ".pb")
    proto = os.path.abspath(proto)
    subprocess.run([protoc, "--proto_path=" + os.path.dirname(proto),
                    "--descriptor_set_out=" + out, proto], check=True)
    fds = descriptor_pb2.FileDescriptorSet()
    with open(out, "rb") as f:
        fds.ParseFromString(f.read())
    if len(fds.file) != 1:
        sys.exit("%s: expected one file without imports, got %d" %
                 (proto, len(fds.file)))
    return fds.file[0]


def field_key(msg, field):
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto
    oneof = (msg.oneof_decl[field.oneof_index].name
             if field.HasField("oneof_index") else None)
    return {
        "name": field.name,
        "number": field.number,
        "type": FieldDescriptorProto.Type.Name(field.type),
        "label": FieldDescriptorProto.Label.Name(field.label),
        "type_name": field.type_name,
        "oneof": oneof,
        "proto3_optional": field.proto3_optional,
        "options": field.options.SerializeToString(deterministic=True),
    }


def collect(file):
    """Flattens a FileDescriptorProto into comparable dictionaries."""
    messages, enums = {}, {}

    def add_enum(prefix, enum):
        enums[prefix + enum.name] = {
            "values": {v.name: v.number for v in enum.value},
            "options": enum.options.SerializeToString(deterministic=True),
        }

    def add_message(prefix, msg):
        name = prefix + msg.name
        messages[name] = {
            "fields": {f.number: field_key(msg, f) for f in msg.field},
            "oneofs": sorted(o.name for o in msg.oneof_decl),
            "reserved": sorted((r.start, r.end) for r in msg.reserved_range),
            "options": msg.options.SerializeToString(deterministic=True),
        }
        for nested in msg.nested_type:
            add_message(name + ".", nested)
        for enum in msg.enum_type:
            add_enum(name + ".", enum)

    for msg in file.message_type:
        add_message(file.package + ".", msg)
    for enum in file.enum_type:
        add_enum(file.package + ".", enum)
    services = {s.name: sorted((m.name, m.input_type, m.output_type)
                               for m in s.method) for s in file.service}
    return {
        "syntax": file.syntax or "proto2",
        "package": file.package,
        "options": file.options.SerializeToString(deterministic=True),
        "messages": messages,
        "enums": enums,
        "services": services,
    }


def diff(project, reference):
    problems = []
    for key in ("syntax", "package", "options", "services"):
        if project[key] != reference[key]:
            problems.append("%s: project %r, reference %r" %
                            (key, project[key], reference[key]))
    for kind in ("messages", "enums"):
        ours, theirs = project[kind], reference[kind]
        for name in sorted(set(ours) | set(theirs)):
            if name not in ours:
                problems.append("%s %s: missing from the project" %
                                (kind[:-1], name))
            elif name not in theirs:
                problems.append("%s %s: not in the reference" %
                                (kind[:-1], name))
            elif kind == "enums":
                a, b = ours[name]["values"], theirs[name]["values"]
                for value in sorted(set(a) | set(b)):
                    if a.get(value) != b.get(value):
                        problems.append("enum %s value %s: project %s, "
                                        "reference %s" % (name, value,
                                                          a.get(value),
                                                          b.get(value)))
                if ours[name]["options"] != theirs[name]["options"]:
                    problems.append("enum %s: options differ" % name)
            else:
                a, b = ours[name], theirs[name]
                for number in sorted(set(a["fields"]) | set(b["fields"])):
                    fa, fb = a["fields"].get(number), b["fields"].get(number)
                    where = "message %s field %d" % (name, number)
                    if fa is None:
                        problems.append("%s (%s): missing from the project" %
                                        (where, fb["name"]))
                    elif fb is None:
                        problems.append("%s (%s): not in the reference" %
                                        (where, fa["name"]))
                    else:
                        for key in fa:
                            if fa[key] != fb[key]:
                                problems.append(
                                    "%s (%s): %s is %r in the project, %r in "
                                    "the reference" % (where, fb["name"], key,
                                                       fa[key], fb[key]))
                for key in ("oneofs", "reserved", "options"):
                    if a[key] != b[key]:
                        problems.append("message %s %s: project %r, "
                                        "reference %r" % (name, key, a[key],
                                                          b[key]))
    return problems


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: check_schema_compat.py PROTOC PROJECT_PROTO "
                 "REFERENCE_PROTO")
    protoc, project_proto, reference_proto = sys.argv[1:]
    if not os.path.isfile(reference_proto):
        print("SKIP: no reference schema at %s" % reference_proto)
        return SKIP
    with tempfile.TemporaryDirectory(prefix="schema-compat-") as tmpdir:
        project = collect(load(protoc, project_proto, tmpdir, "project"))
        reference = collect(load(protoc, reference_proto, tmpdir, "reference"))
    problems = diff(project, reference)
    if problems:
        print("%s is not wire-compatible with %s:" %
              (project_proto, reference_proto))
        for problem in problems:
            print("  " + problem)
        return 1
    print("OK: %s matches %s (%d messages, %d enums, %d fields)" %
          (project_proto, reference_proto, len(project["messages"]),
           len(project["enums"]),
           sum(len(m["fields"]) for m in project["messages"].values())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
