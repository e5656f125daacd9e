"""Checks the `slo` object of a serving report against its other figures.

The good requests are the attainment's share of the measured requests,
never more than meet either bound; the goodput is they over the run's
duration; the bounds are those asked, and the TTFT's share is what its
percentiles allow (p50 within it: at least half).
"""
import json
import sys

serving = json.load(open(sys.argv[1]))["serving"]
slo = serving["slo"]
requests = serving["requests"]
assert abs(slo["attainment"] * requests - slo["good_requests"]) < 1e-9, slo
assert 0 < slo["attainment"] <= min(slo["ttft_attainment"],
                                    slo["tpot_attainment"]), slo
goodput = slo["good_requests"] / serving["duration_s"]
assert abs(slo["request_goodput"] - goodput) < 1e-9 * goodput, slo
ttft = serving["ttft_ms"]
if ttft["p50"] <= slo["ttft_ms"]:
    assert slo["ttft_attainment"] >= 0.5, slo
if ttft["p90"] > slo["ttft_ms"]:
    assert slo["ttft_attainment"] < 0.9 + 1e-9, slo
print(f"ok: {requests} requests, ttft <= {slo['ttft_ms']:g} ms, "
      f"tpot <= {slo['tpot_ms']:g} ms")
