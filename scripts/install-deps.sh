#!/usr/bin/env bash
#===- install-deps.sh - Install stagec's build and test dependencies -----===#
#
# Installs, from Debian 12 packages, whatever of the project's dependencies
# is missing; does nothing (and needs no network) when all are present.
# Run as root, or as a user with sudo.
#
#===----------------------------------------------------------------------===#
set -euo pipefail

packages=(
  # Toolchain and build.
  g++ cmake ninja-build pkg-config python3
  # LLVM ADT/Support, lit and FileCheck.
  llvm-14-dev llvm-14-tools
  # Parser generator (needs a JRE) and its C++ runtime.
  antlr4 default-jre-headless libantlr4-runtime-dev
  # Symbolic algebra, command lines, Chakra protobuf, YAML, tests.
  libginac-dev libcli11-dev libprotobuf-dev protobuf-compiler zlib1g-dev
  python3-protobuf libyaml-cpp-dev libgtest-dev
  # Plots (stage-plot).
  python3-matplotlib
)

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all dependencies are installed"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
