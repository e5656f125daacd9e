#!/usr/bin/env python3
#===- check-layering.py - Arrows only downward between the libraries -----===#
#
# Usage: check-layering.py [ROOT]
#
# Every library under lib/ (with its headers under include/stg/<Lib>/) may
# include the headers of, and link, only the libraries below it in LAYERS
# (and what those use in turn). Checks every `#include "stg/<Lib>/..."` in
# lib/<Lib> and include/stg/<Lib>, and every STG target that
# lib/<Lib>/CMakeLists.txt links, and that every library is in the table.
# Prints one line per violation and exits 1 if there is any.
# docs/architecture.md shows the same table.
#
#===----------------------------------------------------------------------===#

import os
import re
import sys

# Each library and the libraries it uses directly.
LAYERS = {
    "Support": [],
    "Import": ["Support"],
    "IR": ["Support"],
    "Parse": ["IR"],
    "Passes": ["IR"],
    "Chakra": ["Support"],
    "Instantiate": ["IR"],
    "Perf": ["Instantiate"],
    "Perturb": ["Perf"],
    "Emit": ["Chakra", "Perf", "Perturb"],
    "Trace": ["Chakra"],
    "Driver": ["Import", "Parse", "Passes", "Instantiate"],
    "Search": ["Driver", "Perf"],
    "Serve": ["Driver", "Emit", "Perf"],
}

# CMake targets that belong to a library without being named STG<Lib>.
EXTRA_TARGETS = {"STGChakraProto": "Chakra"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"stg/([A-Za-z]+)/')
LINK = re.compile(r"\bSTG([A-Za-z]+)\b")


def allowed(library):
    """The library itself and everything below it."""
    seen = {library}
    stack = [library]
    while stack:
        for used in LAYERS[stack.pop()]:
            if used not in seen:
                seen.add(used)
                stack.append(used)
    return seen


def sources(root, library):
    for top in (os.path.join(root, "lib", library),
                os.path.join(root, "include", "stg", library)):
        for folder, _, files in os.walk(top):
            for name in sorted(files):
                if name.endswith((".h", ".cpp", ".def", ".inc")):
                    yield os.path.join(folder, name)


def linked_libraries(cmake_file):
    with open(cmake_file, encoding="utf-8") as f:
        text = f.read()
    for call in re.findall(r"target_link_libraries\(([^)]*)\)", text):
        for target in LINK.findall(call)[1:]:  # The first is the linker.
            name = "STG" + target
            yield EXTRA_TARGETS.get(name, target)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..")
    problems = []
    present = sorted(d for d in os.listdir(os.path.join(root, "lib"))
                     if os.path.isdir(os.path.join(root, "lib", d)))
    for library in present:
        if library not in LAYERS:
            problems.append("lib/%s: not in the layering table "
                            "(scripts/check-layering.py)" % library)
    for library in LAYERS:
        ok = allowed(library)
        for path in sources(root, library):
            with open(path, encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    match = INCLUDE.match(line)
                    if match and match.group(1) not in ok:
                        problems.append(
                            "%s:%d: %s includes a header of %s, which is "
                            "above it" % (os.path.relpath(path, root), number,
                                          library, match.group(1)))
        cmake = os.path.join(root, "lib", library, "CMakeLists.txt")
        if os.path.exists(cmake):
            for target in linked_libraries(cmake):
                if target in LAYERS and target not in ok:
                    problems.append("%s: %s links STG%s, which is above it"
                                    % (os.path.relpath(cmake, root), library,
                                       target))
    for problem in problems:
        print(problem)
    if problems:
        print("%d layering violation(s)" % len(problems))
        return 1
    print("layering: %d libraries, every arrow downward" %
          sum(1 for lib in LAYERS if lib in present))
    return 0


if __name__ == "__main__":
    sys.exit(main())
