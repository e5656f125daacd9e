//===- HeldUnits.cpp - Compute beside kernels that hold compute units -----===//
//
// Some communication kernels occupy SMs for as long as they move bytes:
// DeepEP's normal dispatch and combine run on 20 of them (its default, and
// Megatron-Core's `moe_deepep_num_sms`), copying tokens between NVLink and
// the NICs, where NCCL's and DeepEP's low-latency kernels leave the copying
// to the network and the copy engines. Compute that overlaps such a kernel
// (two-batch overlap in SGLang's prefill, the expert exchange overlapped
// with the other micro-batch's layers in training) has only the SMs left.
// A compute node keeps `busy` of the device's units busy over the part of
// its time they bound (its UnitUse, DeviceSpec::getUnitUse): all of them
// over all of it for a kernel bound by its FLOPs, fewer for one bound by
// memory, whose bandwidth fewer SMs still draw, none over a low-precision
// GEMM's casts. While nodes holding `held` of the `units` run and fewer
// than `busy` are left, that part stretches by busy / (units - held), as
// a kernel whose thread blocks fill the SMs it is given; the rest does
// not. Measured on an H200 beside a kernel holding 8 to 66 of its 132
// SMs (docs/data/gpu/h200-held-sms.csv, docs/validation.md): large GEMMs
// and attention slow about so, a copy and an add not at all. The
// communication node's own time is what CommunicationCost.cpp says; at
// least one unit is always left to compute.
//
// The compute stream runs one node at a time, so its state is one
// remainder: full-rate picoseconds left, settled whenever a holding node
// starts or ends. A settled picosecond's progress is rounded down and the
// end rounded up, so the clock stays in whole picoseconds and depends only
// on elapsed times: a folded layer's copies still repeat a period (the
// remainder and its age are part of the state compared), and an outcome is
// still a function of the step's shape and its messages' arrivals. One
// whose compute was slowed is not moved with a message (slowedCompute):
// the slowing would move with it only if what it overlaps did too.
//
//===----------------------------------------------------------------------===//

#include "StepSimulation.h"

#include <algorithm>
#include <cassert>

using namespace stg;

/// value x num / den, rounded down or up, without forming the product
/// (which may pass an int64 where the result does not): the remainder's
/// product is below den x num.
static int64_t scale(int64_t value, int64_t num, int64_t den, bool up) {
  return value / den * num + (value % den * num + (up ? den - 1 : 0)) / den;
}

std::pair<int64_t, int64_t> StepSimulation::getComputeRate() const {
  uint32_t units = shape.computeUnits;
  int64_t left = units - std::min(held, units - 1);
  int64_t busy = computeUse.busy;
  if (left >= busy)
    return {1, 1};
  // The bound part of its time stretches by busy / left: the node takes
  // (unbound + bound x busy / left) / Scale of its full-rate time.
  int64_t unbound = computeUse.unbound;
  int64_t bound = UnitUse::Scale - unbound;
  return {UnitUse::Scale * left, unbound * left + bound * busy};
}

int64_t StepSimulation::getComputeEnd(int64_t now) const {
  // The replay bounded the step at its slowest rate (StepStructures.cpp).
  auto [num, den] = getComputeRate();
  return now + scale(computeLeft, den, num, true);
}

int64_t StepSimulation::startCompute(uint32_t id, int64_t now,
                                     int64_t duration) {
  computeNode = id;
  computeUse = shape.unitUse[slots[id]];
  if (!computeUse.busy)
    computeUse.busy = shape.computeUnits;
  computeLeft = duration;
  computeSettled = computeStart = now;
  if (held && tracking)
    slowedCompute = true;
  return getComputeEnd(now);
}

void StepSimulation::changeHeldUnits(int32_t delta, int64_t now) {
  bool computing = computeNode != NoNode;
  if (computing) {
    auto [num, den] = getComputeRate();
    int64_t progress = scale(now - computeSettled, num, den, false);
    computeLeft = std::max<int64_t>(0, computeLeft - progress);
    computeSettled = now;
  }
  assert(delta >= 0 || held >= uint32_t(-delta));
  held = uint32_t(int64_t(held) + delta);
  if (computing) {
    setEvent(computeNode, getComputeEnd(now));
    if (tracking)
      slowedCompute = true;
  }
}
