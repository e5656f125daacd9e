#!/usr/bin/env python3
#===- check_windows.py - --serve --emit-top writes what stagec writes ----===#
#
# Usage: check_windows.py DIR STAGEC MODEL [STAGEC-FLAG...]
#
# For each DIR/rank-K written by `stage-search --serve --emit-top`, runs
# STAGEC MODEL (with the extra flags, such as --set, given to the search)
# with the run's `stagec` flags and `--window` from the window's manifest
# and `-o`, and checks that the two trace sets hold the same files, the
# same bytes but for the manifest, and manifests with the same window, step
# estimate and mesh. Prints one line a window for FileCheck.
#
#===------------------------------------------------------------------------===#

import filecmp
import json
import os
import shlex
import subprocess
import sys
import tempfile


def files(directory):
    """Every file under `directory`, relative, but ASTRA-sim's own output."""
    found = []
    for root, dirs, names in os.walk(directory):
        dirs[:] = [d for d in dirs if d != "log"]
        for name in names:
            if name != "astra-sim.log":
                found.append(os.path.relpath(os.path.join(root, name),
                                             directory))
    return sorted(found)


def main():
    out, stagec, model = sys.argv[1:4]
    extra = sys.argv[4:]
    windows = sorted((d for d in os.listdir(out) if d.startswith("rank-")),
                     key=lambda d: int(d.split("-")[1]))
    for window in windows:
        ours = os.path.join(out, window)
        manifest = json.load(open(os.path.join(
            ours, [f for f in os.listdir(ours)
                   if f.endswith(".manifest.json")][0])))
        options = dict(manifest["options"])
        with tempfile.TemporaryDirectory() as scratch:
            theirs = os.path.join(scratch, "w")
            command = ([stagec, model] + extra + shlex.split(options["stagec"])
                       + ["--window", options["window"], "-q", "-o", theirs])
            subprocess.run(command, check=True)
            ours_files, theirs_files = files(ours), files(theirs)
            if ours_files != theirs_files:
                print("%s: files differ: %s and %s" % (window, ours_files,
                                                       theirs_files))
                return 1
            for name in ours_files:
                if name.endswith(".manifest.json"):
                    theirs_manifest = json.load(open(os.path.join(theirs,
                                                                  name)))
                    for key in ("serving_window", "step_estimate", "mesh"):
                        if manifest[key] != theirs_manifest[key]:
                            print("%s: the manifests' %s differ" % (window,
                                                                    key))
                            return 1
                elif not filecmp.cmp(os.path.join(ours, name),
                                     os.path.join(theirs, name),
                                     shallow=False):
                    print("%s: %s differs" % (window, name))
                    return 1
        print("%s: %s, %d ranks, as stagec writes it (%d files)" % (
            window, options["deployment"], manifest["mesh"]["ranks"],
            len(ours_files)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
