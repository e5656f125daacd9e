#!/usr/bin/env python3
# Usage: same_plans.py BIG.json SMALL.json: every plan of the SMALL search
# is in the BIG one, priced alike (a plan's price does not depend on the
# other plans searched beside it).
import json
import sys

big = {p["plan"]: p for p in json.load(open(sys.argv[1]))["plans"]}
small = json.load(open(sys.argv[2]))["plans"]
fields = ("step_micros", "memory", "status")
differ = [p["plan"] for p in small
          if [big[p["plan"]][f] for f in fields] != [p[f] for f in fields]]
print("%d plans, %d priced otherwise beside others" % (len(small), len(differ)))
for label in differ[:5]:
    print("  " + label)
