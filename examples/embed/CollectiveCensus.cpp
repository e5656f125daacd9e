//===- CollectiveCensus.cpp - An example pass outside stagec --------------===//
//
// A pass is a class with a name and a run() over the Module. This one only
// reads the IR: it walks every op (repeat bodies included, counted once per
// repetition) and sums the `bytes` that match-collectives recorded.
//
//===----------------------------------------------------------------------===//

#include "CollectiveCensus.h"

#include <map>
#include <string>

using namespace stg;

namespace {

class CollectiveCensusPass : public Pass {
public:
  explicit CollectiveCensusPass(llvm::raw_ostream &os) : os(os) {}
  llvm::StringRef getName() const override { return "collective-census"; }

  LogicalResult run(Module &module, DiagnosticEngine &diags) override {
    Graph *model = module.getModel();
    if (!model) {
      diags.error({}, "collective-census needs a model");
      return failure();
    }
    // kind + axes -> (count, bytes), ordered for stable output.
    std::map<std::string, std::pair<Expr, Expr>> census;
    count(*model, 1, census);
    ExprPrinter printer = module.getPrinter();
    // Bind the dims to their values; axis degrees stay symbolic. Binding
    // fails only if some dim divides by zero.
    for (const auto &[key, entry] : census) {
      std::optional<Expr> count = module.bindDims(entry.first);
      std::optional<Expr> bytes = module.bindDims(entry.second);
      if (!count || !bytes) {
        diags.error({}, "collective-census: a dim divides by zero");
        return failure();
      }
      os << key << ": " << printer.str(*count) << " x, " << printer.str(*bytes)
         << " bytes per rank\n";
    }
    return success();
  }

private:
  void count(const Graph &graph, const Expr &times,
             std::map<std::string, std::pair<Expr, Expr>> &census) {
    for (const auto &op : graph.getOps()) {
      if (const Graph *body = op->getBody()) {
        count(*body, times * op->getAttr("count")->expr, census);
        continue;
      }
      if (!op->getInfo().has(Collective))
        continue;
      std::string key = op->getKindName().str() + " over (";
      for (const Axis *axis : op->getAttr("axes")->axes)
        key += (key.back() == '(' ? "" : ", ") + axis->name;
      key += ")";
      auto [it, inserted] = census.try_emplace(key, Expr(0), Expr(0));
      it->second.first += times;
      it->second.second += times * op->getAttr("bytes")->expr;
    }
  }

  llvm::raw_ostream &os;
};

} // namespace

std::unique_ptr<Pass> createCollectiveCensusPass(llvm::raw_ostream &os) {
  return std::make_unique<CollectiveCensusPass>(os);
}
