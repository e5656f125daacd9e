//===- DeploymentSpace.cpp - Serving deployments, SLOs and ranking --------===//
//
// What the deployment search runs and how it judges a run: the instance
// plans' labels, the deployments of a budget, the SLOs on one statistic
// of the latencies, and the ranking with its Pareto front of tokens/s per
// GPU against tokens/s per user.
//
//===----------------------------------------------------------------------===//

#include "stg/Serve/DeploymentSearch.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

using namespace stg;

std::string InstancePlan::getLabel() const {
  std::string label = "tp" + std::to_string(tp);
  if (pp > 1)
    label += "pp" + std::to_string(pp);
  if (ep > 1)
    label += "ep" + std::to_string(ep);
  return label;
}

std::vector<std::pair<std::string, unsigned>>
InstancePlan::getDegrees() const {
  std::vector<std::pair<std::string, unsigned>> degrees;
  for (auto [axis, degree] : {std::pair{"tp", tp}, {"pp", pp}, {"ep", ep}})
    if (degree > 1)
      degrees.push_back({axis, degree});
  return degrees;
}

llvm::StringRef stg::getSLOStatisticName(SLOStatistic statistic) {
  switch (statistic) {
  case SLOStatistic::Mean:
    return "mean";
  case SLOStatistic::P50:
    return "p50";
  case SLOStatistic::P90:
    return "p90";
  case SLOStatistic::P99:
    return "p99";
  }
  return "p50";
}

std::optional<SLOStatistic> stg::parseSLOStatistic(llvm::StringRef name) {
  for (SLOStatistic statistic : {SLOStatistic::Mean, SLOStatistic::P50,
                                 SLOStatistic::P90, SLOStatistic::P99})
    if (getSLOStatisticName(statistic) == name)
      return statistic;
  return std::nullopt;
}

double stg::getLatencyStatistic(const LatencySummary &summary,
                                SLOStatistic statistic) {
  switch (statistic) {
  case SLOStatistic::Mean:
    return summary.mean;
  case SLOStatistic::P50:
    return summary.p50;
  case SLOStatistic::P90:
    return summary.p90;
  case SLOStatistic::P99:
    return summary.p99;
  }
  return summary.p50;
}

std::string stg::formatShortest(double value) {
  if (!std::isfinite(value))
    return value > 0 ? "inf" : "nan";
  char text[32];
  if (value == std::floor(value) && std::abs(value) < 1e15) {
    std::snprintf(text, sizeof text, "%.0f", value);
    return text;
  }
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value)
      break;
  }
  return text;
}

std::optional<std::string>
stg::checkSLOs(const ServingSummary &summary,
               const DeploymentSearchOptions &options) {
  if (const std::optional<SLOAttainment> &slo = summary.slo;
      slo && options.sloAttainment) {
    if (slo->attainment >= *options.sloAttainment)
      return std::nullopt;
    return llvm::formatv("{0:F1} % of requests within the SLOs < {1:F1} %",
                         100 * slo->attainment, 100 * *options.sloAttainment)
        .str();
  }
  std::string missed;
  llvm::StringRef name = getSLOStatisticName(options.sloStatistic);
  auto check = [&](llvm::StringRef what, const LatencySummary &latency,
                   std::optional<double> limit) {
    double value = getLatencyStatistic(latency, options.sloStatistic);
    if (!limit || value <= *limit)
      return;
    if (!missed.empty())
      missed += ", ";
    missed += llvm::formatv("{0} {1} {2:F1} ms > {3} ms", what, name, value,
                            formatShortest(*limit))
                  .str();
  };
  check("ttft", summary.ttft, options.maxTTFTMillis);
  check("tpot", summary.tpot, options.maxTPOTMillis);
  if (missed.empty())
    return std::nullopt;
  return missed;
}

std::vector<Deployment>
stg::enumerateDeployments(llvm::ArrayRef<InstancePlanResult> plans,
                          unsigned gpus, bool aggregated, bool disaggregated) {
  std::vector<Deployment> deployments;
  if (aggregated)
    for (unsigned index = 0; index < plans.size(); ++index) {
      const InstancePlanResult &plan = plans[index];
      unsigned size = plan.plan.getGPUs();
      if (plan.fitsDecode && size <= gpus)
        deployments.push_back({std::nullopt, {index, gpus / size}});
    }
  if (!disaggregated)
    return deployments;
  for (unsigned p = 0; p < plans.size(); ++p) {
    if (!plans[p].fitsPrefill)
      continue;
    for (unsigned d = 0; d < plans.size(); ++d) {
      if (!plans[d].fitsDecode ||
          plans[d].plan.precision != plans[p].plan.precision ||
          plans[d].plan.twoBatchOverlap != plans[p].plan.twoBatchOverlap)
        continue;
      unsigned prefillSize = plans[p].plan.getGPUs();
      unsigned decodeSize = plans[d].plan.getGPUs();
      // Maximal splits only: the GPUs left over hold no further instance
      // of either pool (the decode pool takes the most the rest holds).
      for (unsigned x = 1; uint64_t(x) * prefillSize + decodeSize <= gpus;
           ++x) {
        unsigned rest = gpus - x * prefillSize;
        unsigned y = rest / decodeSize;
        if (rest - y * decodeSize >= prefillSize)
          continue;
        deployments.push_back({PoolChoice{p, x}, {d, y}});
      }
    }
  }
  return deployments;
}

void stg::rankDeployments(DeploymentTable &table) {
  std::vector<DeploymentRun> &runs = table.runs;
  std::stable_sort(runs.begin(), runs.end(),
                   [](const DeploymentRun &a, const DeploymentRun &b) {
                     if (a.status != b.status)
                       return a.status < b.status;
                     const ServingSummary &x = a.summary, &y = b.summary;
                     if (x.outputTokensPerSecondPerGPU !=
                         y.outputTokensPerSecondPerGPU)
                       return x.outputTokensPerSecondPerGPU >
                              y.outputTokensPerSecondPerGPU;
                     return x.outputTokensPerSecondPerUser >
                            y.outputTokensPerSecondPerUser;
                   });
  // In that order, a run is on the front when it is faster per user than
  // every run before it, or at the same point as the front's last run.
  const DeploymentRun *last = nullptr;
  unsigned rank = 0;
  for (DeploymentRun &run : runs) {
    run.rank = 0;
    run.pareto = false;
    if (run.status != RunStatus::Meets)
      continue;
    run.rank = ++rank;
    const ServingSummary &summary = run.summary;
    if (!last ||
        summary.outputTokensPerSecondPerUser >
            last->summary.outputTokensPerSecondPerUser ||
        (summary.outputTokensPerSecondPerUser ==
             last->summary.outputTokensPerSecondPerUser &&
         summary.outputTokensPerSecondPerGPU ==
             last->summary.outputTokensPerSecondPerGPU)) {
      run.pareto = true;
      last = &run;
    }
  }
}
