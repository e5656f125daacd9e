//===- OpKind.cpp - Op kinds, their arity and attribute schemas -----------===//
//
// The attribute schema of each op, in positional order. `reduce[sum, 2]` and
// `reduce[kind=sum, dim=2]` are the same call.
//
//===----------------------------------------------------------------------===//

#include "stg/IR/OpKind.h"

#include "llvm/ADT/STLExtras.h"

#include <vector>

using namespace stg;

namespace {
using K = AttrKind;
const AttrSpec kNoAttrs[] = {{nullptr, K::Int}};
const AttrSpec kEinsum[] = {{"spec", K::Einsum}};
// `window` (positions a query sees, itself included, for sliding; the chunk
// size for chunked) is set with those masks only, 0 otherwise; `softcap` 0
// means no logit soft-capping. `cache`: the channels a position keeps in a
// serving cache where the keys and values are rebuilt from a smaller
// latent (MLA's prefill: KVL + DHR, one head on every rank); 0: the keys
// and values themselves.
const AttrSpec kAttention[] = {
    {"mask", K::Ident, "none", "causal|none|sliding|chunked"},
    {"kernel", K::Ident, "fused", "fused|unfused"},
    {"dropout", K::Expr, "0"},
    {"window", K::Expr, "0"},
    {"softcap", K::Expr, "0"},
    {"cache", K::Expr, "0"}};
const AttrSpec kSoftmax[] = {{"dim", K::Int, "-1"}};
const AttrSpec kReduce[] = {{"kind", K::Ident, nullptr, "sum|max|mean"},
                            {"dim", K::Int, "-1"}};
const AttrSpec kScale[] = {{"factor", K::Expr}};
const AttrSpec kElementwise[] = {{"flops", K::Expr, "1"}};
// GPT-OSS's constants; numbers, not dims (ShapeRules.cpp checks them).
const AttrSpec kSwigluClamped[] = {{"alpha", K::Expr, "851/500"},
                                   {"limit", K::Expr, "7"}};
const AttrSpec kDropout[] = {{"p", K::Expr, "1/10"}};
const AttrSpec kTranspose[] = {{"perm", K::IntList}};
const AttrSpec kConcat[] = {{"dim", K::Int}};
const AttrSpec kSlice[] = {{"dim", K::Int}, {"size", K::Expr},
                           {"offset", K::Expr, "0"}};
const AttrSpec kSplit[] = {{"dim", K::Int}, {"parts", K::Int}};
const AttrSpec kPScan[] = {{"dim", K::Int, "1"}};
const AttrSpec kConv1D[] = {{"kernel", K::Expr}};
const AttrSpec kRoute[] = {{"topk", K::Expr}, {"experts", K::Expr}};
// The slots' capacity factor in percent (the templates' CAP): at 100 an
// expert's slots hold its average load, and the slots past the tokens
// routed are rounding, which a dropless grouped GEMM does not compute.
const AttrSpec kDispatch[] = {{"capacity", K::Expr, "100"}};
// Collectives record the bytes each rank contributes (its input buffer, the
// nccl-tests convention), filled in by match-collectives.
const AttrSpec kAxes[] = {{"axes", K::Axes},
                          {"bytes", K::Expr, "0", nullptr, true}};
const AttrSpec kGather[] = {{"dim", K::Int},
                            {"axes", K::Axes},
                            {"bytes", K::Expr, "0", nullptr, true}};
const AttrSpec kAllToAll[] = {{"from_dim", K::Int},
                              {"to_dim", K::Int},
                              {"axes", K::Axes},
                              {"bytes", K::Expr, "0", nullptr, true}};
const AttrSpec kShard[] = {{"dim", K::Int}, {"axes", K::Axes}};
const AttrSpec kCustom[] = {{"name", K::String}, {"flops", K::Expr, "0"},
                            {"bytes", K::Expr, "0"}};
const AttrSpec kRepeat[] = {{"count", K::Expr}, {"name", K::String}};
// A grad op also carries the forward op's own attributes.
const AttrSpec kGrad[] = {{"of", K::String}, {"outs", K::Int}, {"wrt", K::IntList}};

llvm::ArrayRef<AttrSpec> attrsOf(OpKind kind) {
  switch (kind) {
  case OpKind::Einsum: return kEinsum;
  case OpKind::Attention: return kAttention;
  case OpKind::Softmax: return kSoftmax;
  case OpKind::Reduce: return kReduce;
  case OpKind::Scale: return kScale;
  case OpKind::Elementwise: return kElementwise;
  case OpKind::SwigluClamped: return kSwigluClamped;
  case OpKind::Dropout: return kDropout;
  case OpKind::Transpose: return kTranspose;
  case OpKind::Concat: return kConcat;
  case OpKind::Slice: return kSlice;
  case OpKind::Split: return kSplit;
  case OpKind::PScan: return kPScan;
  case OpKind::Conv1D: return kConv1D;
  case OpKind::Route: return kRoute;
  case OpKind::Dispatch:
    return kDispatch;
  case OpKind::AllReduce:
  case OpKind::Broadcast: return kAxes;
  case OpKind::AllGather:
  case OpKind::ReduceScatter: return kGather;
  case OpKind::AllToAll: return kAllToAll;
  case OpKind::Shard: return kShard;
  case OpKind::Custom: return kCustom;
  case OpKind::Repeat: return kRepeat;
  case OpKind::Grad: return kGrad;
  default: return llvm::ArrayRef<AttrSpec>(kNoAttrs).drop_front();
  }
}

std::vector<OpInfo> buildOpInfos() {
  std::vector<OpInfo> infos;
#define STG_OP(Enum, Name, Min, Max, Flags)                                    \
  infos.push_back(                                                             \
      {OpKind::Enum, Name, Min, Max, Flags, attrsOf(OpKind::Enum)});
#include "stg/IR/Ops.def"
  return infos;
}

const std::vector<OpInfo> &opInfos() {
  static const std::vector<OpInfo> infos = buildOpInfos();
  return infos;
}
} // namespace

const AttrSpec *OpInfo::findAttr(llvm::StringRef attrName) const {
  for (const AttrSpec &spec : attrs)
    if (attrName == spec.name)
      return &spec;
  return nullptr;
}

const OpInfo &stg::getOpInfo(OpKind kind) {
  return opInfos()[static_cast<size_t>(kind)];
}

std::optional<OpKind> stg::lookupOpKind(llvm::StringRef name) {
  for (const OpInfo &info : opInfos())
    if (info.name == name && !info.has(Internal))
      return info.kind;
  return std::nullopt;
}

llvm::ArrayRef<OpInfo> stg::getAllOpInfos() { return opInfos(); }
