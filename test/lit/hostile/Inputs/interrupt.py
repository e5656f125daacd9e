"""Starts stagec writing a large trace set, sends SIGNAL after DELAY seconds,
and checks that nothing is left under WORKDIR: whether the signal came
during compilation (the default action) or during writing (the temporary
directory and the parents -o made are removed, exit status 130).

  interrupt.py STAGEC MODEL WORKDIR SIGNAL DELAY
"""
import os
import signal
import subprocess
import sys
import time

stagec, model, workdir, name, delay = sys.argv[1:6]
os.makedirs(workdir, exist_ok=True)
command = [stagec, model, "--set", "B=4096", "--set", "L=16", "--dp", "4096",
           "--format", "json", "-j", "1", "-q",
           "-o", os.path.join(workdir, "new", "traces")]
process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
time.sleep(float(delay))
process.send_signal(getattr(signal, name))
_, errors = process.communicate(timeout=60)
status = process.returncode
left = sorted(os.listdir(workdir))
if status == 0:
    sys.exit("stagec finished before the signal; make the set larger")
if status not in (130, -getattr(signal, name)):
    sys.exit("unexpected exit status %d: %s" % (status, errors))
if left:
    sys.exit("left behind: %s" % left)
print("status %d, nothing left" % status)
