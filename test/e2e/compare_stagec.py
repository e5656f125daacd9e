#!/usr/bin/env python3
#===- compare_stagec.py - Two stagec builds, byte for byte ---------------===#
#
# Usage: compare_stagec.py OLD_STAGEC NEW_STAGEC TEMPLATES WORKDIR
#
# The check a refactoring that must not change behaviour runs: every plan of
# the strategy matrix, the same plans with a device model and --report, and
# perturbed variants (a straggler and slow NICs) are compiled by both
# binaries; every written file, the report text and the exit status must be
# identical. Build the old binary from the commit before the change, e.g.
#
#   git worktree add /tmp/old HEAD~1 && cmake -S /tmp/old -B /tmp/old/build \
#       -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C /tmp/old/build stagec
#
#===----------------------------------------------------------------------===#

import filecmp
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_strategy_matrix as matrix  # noqa: E402

INPUTS = os.path.join(HERE, "..", "lit", "stagec", "Inputs")


def plans():
    for name, flags, *template in matrix.MATRIX + list(matrix.preset_plans()):
        model = template[0] if template else "llama.stg"
        sizes = matrix.SHORT if template else matrix.SMALL_LLAMA
        yield name, model, sizes + flags
        yield name + "-h100", model, sizes + flags + ["--device", "H100",
                                                      "--report"]
    for spec in ("straggler.yaml", "slow-nic.yaml"):
        yield ("perturb-" + spec[:-5], "llama.stg",
               matrix.SMALL_LLAMA + ["--dp", "2", "--tp", "2", "--pp", "2",
                                     "--device", "H100", "--report",
                                     "--perturb", os.path.join(INPUTS, spec),
                                     "--variants", "2", "-j", "1"])


def differences(left, right):
    compare = filecmp.dircmp(left, right)
    found = []

    def walk(c, prefix):
        found.extend(prefix + f for f in c.left_only + c.right_only)
        _, mismatch, errors = filecmp.cmpfiles(c.left, c.right, c.common_files,
                                               shallow=False)
        found.extend(prefix + f for f in mismatch + errors)
        for sub, child in c.subdirs.items():
            walk(child, prefix + sub + "/")
    walk(compare, "")
    return found


def main():
    old, new, templates, workdir = sys.argv[1:5]
    shutil.rmtree(workdir, ignore_errors=True)
    failures = 0
    count = 0
    for name, model, flags in plans():
        outputs = []
        for label, stagec in (("old", old), ("new", new)):
            out = os.path.join(workdir, label, name)
            os.makedirs(os.path.dirname(out), exist_ok=True)
            result = subprocess.run(
                [stagec, os.path.join(templates, model), "-o", out] + flags,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            # The report names the output directory; compare it without.
            outputs.append((result.returncode,
                            result.stdout.replace(out, "OUT"), out))
        count += 1
        (old_status, old_text, old_out), (new_status, new_text, new_out) = \
            outputs
        problems = []
        if old_status != new_status:
            problems.append("exit %d vs %d" % (old_status, new_status))
        if old_text != new_text:
            problems.append("report text differs")
        if os.path.isdir(old_out) != os.path.isdir(new_out):
            problems.append("only one run wrote files")
        elif os.path.isdir(old_out):
            problems += ["differs: " + f for f in differences(old_out,
                                                              new_out)]
        if problems:
            failures += 1
            print("FAIL %s: %s" % (name, "; ".join(problems[:5])))
        else:
            print("same %s" % name)
    print("%d of %d plans identical" % (count - failures, count))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
