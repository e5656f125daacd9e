//===- HeldUnits.cpp - Compute beside kernels that hold compute units -----===//
//
// Some communication kernels occupy SMs for as long as they move bytes:
// DeepEP's normal dispatch and combine run on 20 of them (its default, and
// Megatron-Core's `moe_deepep_num_sms`), copying tokens between NVLink and
// the NICs, where NCCL's and DeepEP's low-latency kernels leave the copying
// to the network and the copy engines. Compute that overlaps such a kernel
// (two-batch overlap in SGLang's prefill, the expert exchange overlapped
// with the other micro-batch's layers in training) has only the SMs left:
// while nodes holding `held` of the device's `units` run, the compute node
// progresses at (units - held) / units of its rate, as a kernel whose
// thread blocks fill the SMs it is given. The communication node's own
// time is what CommunicationCost.cpp says; at least one unit is always
// left to compute.
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

/// The compute rate out of `units` while `held` are taken: at least one.
static int64_t getComputeRate(uint32_t units, uint32_t held) {
  return int64_t(units - std::min(held, units - 1));
}

/// value x num / den, rounded down or up, without forming the product
/// (which may pass an int64 where the result does not): the remainder's
/// product is below den x num.
static int64_t scale(int64_t value, int64_t num, int64_t den, bool up) {
  return value / den * num + (value % den * num + (up ? den - 1 : 0)) / den;
}

int64_t StepSimulation::getComputeEnd(int64_t now) const {
  // The replay bounded the step at its slowest rate (StepStructures.cpp).
  return now + scale(computeLeft, shape.computeUnits,
                     getComputeRate(shape.computeUnits, held), true);
}

int64_t StepSimulation::startCompute(uint32_t id, int64_t now,
                                     int64_t duration) {
  computeNode = id;
  computeLeft = duration;
  computeSettled = computeStart = now;
  if (held && tracking)
    slowedCompute = true;
  return getComputeEnd(now);
}

void StepSimulation::changeHeldUnits(int32_t delta, int64_t now) {
  bool computing = computeNode != NoNode;
  if (computing) {
    int64_t progress =
        scale(now - computeSettled, getComputeRate(shape.computeUnits, held),
              shape.computeUnits, false);
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
