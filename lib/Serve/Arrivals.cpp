//===- Arrivals.cpp - When an open loop's conversations arrive ------------===//
//
// An open-loop run's conversations arrive at a trace's times or at a rate.
// At a rate the gaps between them are gamma-distributed with mean 1/rate
// and shape `burstiness`, as vLLM's benchmark_serving draws them: shape 1
// gives a Poisson process's exponential gaps, a smaller shape bursts of
// close arrivals between long pauses. They are drawn from the 53 high bits
// of a Mersenne twister (Marsaglia and Tsang's method, its normals by
// Marsaglia's polar method), not by <random>'s distributions, whose
// algorithms differ between standard libraries: a seed gives the same
// times everywhere.
//
//===----------------------------------------------------------------------===//

#include "Simulation.h"

#include <cmath>

using namespace stg;
using namespace stg::serve;

namespace {

class GapSource {
public:
  explicit GapSource(uint64_t seed) : random(seed) {}

  /// Uniform in [0, 1).
  double getUniform() { return double(random() >> 11) * 0x1.0p-53; }

  double getExponential() { return -std::log1p(-getUniform()); }

  double getNormal() {
    for (;;) {
      double u = 2 * getUniform() - 1, v = 2 * getUniform() - 1;
      double s = u * u + v * v;
      if (s > 0 && s < 1)
        return u * std::sqrt(-2 * std::log(s) / s);
    }
  }

  /// Gamma of `shape` and scale 1.
  double getGamma(double shape) {
    if (shape < 1) {
      double u = 0;
      while (u == 0)
        u = getUniform();
      return getGamma(shape + 1) * std::pow(u, 1 / shape);
    }
    double d = shape - 1.0 / 3, c = 1 / std::sqrt(9 * d);
    for (;;) {
      double x = getNormal(), v = 1 + c * x;
      if (v <= 0)
        continue;
      v = v * v * v;
      double u = getUniform();
      if (u > 0 && std::log(u) < x * x / 2 + d - d * v + d * std::log(v))
        return d * v;
    }
  }

private:
  std::mt19937_64 random;
};

} // namespace

std::vector<double> serve::getArrivalTimes(const ServingWorkload &workload,
                                           uint64_t count) {
  if (!workload.arrivals.empty())
    return std::vector<double>(workload.arrivals.begin(),
                               workload.arrivals.begin() + count);
  std::vector<double> times;
  times.reserve(count);
  GapSource gaps(workload.seed);
  double rate = *workload.requestRate, shape = workload.burstiness, time = 0;
  while (times.size() < count) {
    times.push_back(time);
    // The exponential's own draw when Poisson, as before burstiness was.
    double gap =
        shape == 1 ? gaps.getExponential() : gaps.getGamma(shape) / shape;
    if (std::isfinite(rate))
      time += gap / rate * 1e6;
  }
  return times;
}
