#!/bin/sh
# A stand-in for ASTRA-sim's analytical binary: it reads nothing but the
# workload prefix, and says every rank of the set finished, rank R at
# 1,000,000 + 1000 R cycles (or, with FAKE_ASTRA_UNFINISHED=1, leaves the
# last rank unfinished, as a deadlocked trace set would). It also writes
# log/ into its working directory, as the real one does.
for arg; do
  case $arg in
    --workload-configuration=*) prefix=${arg#*=} ;;
  esac
done
mkdir -p log && echo run > log/log.log
count=0
for f in "$prefix".*.et; do count=$((count + 1)); done
last=$((count - 1))
[ "${FAKE_ASTRA_UNFINISHED:-0}" = 1 ] && last=$((count - 2))
rank=0
while [ $rank -le $last ]; do
  echo "[workload] [info] sys[$rank] finished, $((1000000 + 1000 * rank)) cycles, exposed communication 0 cycles."
  rank=$((rank + 1))
done
