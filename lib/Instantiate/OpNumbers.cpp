//===- OpNumbers.cpp - An op's costs, evaluated once ----------------------===//
//
// A cost is a count: once bound it must be a non-negative integer, else
// the op's line gets an error naming the op, the formula and the binding
// (a `custom` op's FLOPs that go negative in a decode step, S = 1). The one
// exception is attention and its gradient, whose formulas are averages by
// design (the 2.5x backward, a context-parallel rank's share of the masked
// pairs, an unfused kernel's half-byte dropout mask per score): those round
// up, as a kernel does whole operations (docs/cost-model.md).
//
//===----------------------------------------------------------------------===//

#include "stg/Instantiate/OpNumbers.h"

#include "stg/IR/Cost.h"
#include "stg/IR/GradOp.h"

#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <limits>
#include <map>

using namespace stg;

/// `number` as a count, or nothing: see evaluate for why not.
static std::optional<int64_t> getCount(const GiNaC::numeric &number,
                                       bool roundUp) {
  if (!number.is_real())
    return std::nullopt;
  double real = number.to_double();
  if (real < 0 || real >= 9.2e18 || (!number.is_integer() && !roundUp))
    return std::nullopt;
  // Exact integers stay exact (a double has 53 bits); a fraction rounds
  // up: a kernel does whole operations.
  if (number.is_integer())
    return int64_t(number.to_long());
  return int64_t(std::ceil(real));
}

std::optional<int64_t> OpNumberCache::tryEvaluate(const Expr &e,
                                                  bool roundUp) const {
  std::optional<Expr> bound = module.bindAll(e);
  if (!bound || !GiNaC::is_a<GiNaC::numeric>(*bound))
    return std::nullopt;
  return getCount(GiNaC::ex_to<GiNaC::numeric>(*bound), roundUp);
}

std::optional<Rational>
OpNumberCache::tryCompiled(const CompiledExpr &program) {
  if (!program.isValid())
    return std::nullopt;
  // Each symbol bound as bindAll binds it in a formula: the formula's
  // value is then the one substitution gives.
  const std::vector<Expr> &symbols = slots.getSymbols();
  for (size_t slot = symbolValues.size(); slot < symbols.size(); ++slot) {
    std::optional<Expr> bound = module.bindAll(symbols[slot]);
    symbolValues.push_back(bound ? Rational::fromNumeric(*bound)
                                 : std::nullopt);
  }
  return program.evaluate(symbolValues);
}

std::optional<int64_t> OpNumberCache::tryEvaluate(const Expr &e,
                                                  const CompiledExpr &program,
                                                  bool roundUp) {
  std::optional<Rational> value = tryCompiled(program);
  if (!value)
    return tryEvaluate(e, roundUp);
  // A whole count that a double holds exactly passes every check; anything
  // else is checked on the GiNaC number, which converts to double alike.
  if (value->isInteger() && value->num >= 0 &&
      value->num <= (__int128(1) << 53))
    return int64_t(value->num);
  if (value->num > INT64_MAX || value->num < INT64_MIN ||
      value->den > INT64_MAX)
    return tryEvaluate(e, roundUp);
  return getCount(GiNaC::numeric(long(value->num)) /
                      GiNaC::numeric(long(value->den)),
                  roundUp);
}

std::optional<int64_t> OpNumberCache::evaluate(const Expr &e, SourceLoc loc,
                                               llvm::StringRef what,
                                               bool roundUp) {
  if (std::optional<int64_t> count = tryEvaluate(e, roundUp))
    return count;
  ExprPrinter printer = module.getPrinter();
  std::optional<Expr> bound = module.bindAll(e);
  auto fail = [&](const llvm::Twine &why) {
    diags->error(loc, "cannot instantiate the " + what + ", " + printer.str(e) +
                          ": " + why);
    return std::nullopt;
  };
  if (!bound)
    return fail("it divides by zero with " + module.describeBindings(e));
  if (GiNaC::is_a<GiNaC::numeric>(*bound)) {
    const auto &number = GiNaC::ex_to<GiNaC::numeric>(*bound);
    double real = number.to_double();
    std::string value = printer.str(*bound);
    std::string bindings = ", with " + module.describeBindings(e);
    if (!number.is_real() || real < 0)
      return fail("it is negative, " + value + bindings);
    if (real >= 9.2e18)
      return fail("it is " + value + ", more than 2^63" + bindings);
    if (!number.is_integer() && !roundUp)
      return fail("it is " + value + ", not a whole number" + bindings);
    // Exact integers stay exact (a double has 53 bits); a fraction rounds
    // up: a kernel does whole operations.
    if (number.is_integer())
      return int64_t(number.to_long());
    return int64_t(std::ceil(real));
  }
  std::string names;
  for (const std::string &name : getSymbolNames(*bound))
    names += (names.empty() ? "" : ", ") + name;
  return fail("no value for " + names);
}

GemmShape OpNumberCache::getGemmShape(const Op &einsum) {
  const EinsumSpec &spec = einsum.getAttr("spec")->einsum;
  if (spec.inputs.size() != 2)
    return {};
  std::vector<CompiledExpr> &programs = getFormulas(einsum).gemmDims;
  if (programs.empty())
    for (unsigned k = 0; k < 2; ++k)
      for (unsigned d = 0; d < spec.inputs[k].size(); ++d)
        programs.push_back(CompiledExpr::compile(
            einsum.getOperand(k)->getType().getLocalDim(d), slots));
  std::map<char, int64_t> extent;
  size_t index = 0;
  for (unsigned k = 0; k < 2; ++k)
    for (unsigned d = 0; d < spec.inputs[k].size(); ++d) {
      // As getIntegerValue of the bound dim, from the program if it tells.
      std::optional<long long> value;
      if (std::optional<Rational> exact = tryCompiled(programs[index++])) {
        if (exact->isInteger() && exact->num <= (__int128(1) << 62) &&
            exact->num >= -(__int128(1) << 62))
          value = (long long)exact->num;
      } else {
        std::optional<Expr> bound =
            module.bindAll(einsum.getOperand(k)->getType().getLocalDim(d));
        value = bound ? getIntegerValue(*bound) : std::nullopt;
      }
      if (!value || *value <= 0)
        return {};
      extent[spec.inputs[k][d]] = *value;
    }
  GemmShape gemm{1, 1, 1, 1};
  for (const auto &[index, size] : extent) {
    bool inFirst = spec.inputs[0].find(index) != std::string::npos;
    bool inSecond = spec.inputs[1].find(index) != std::string::npos;
    bool inOutput = spec.output.find(index) != std::string::npos;
    int64_t &dim = !inOutput              ? gemm.k
                   : inFirst && inSecond ? gemm.batch
                   : inFirst             ? gemm.m
                                         : gemm.n;
    dim *= size;
  }
  return gemm;
}

/// True for attention and its gradient, whose costs are averages by design
/// and round up.
static bool isAttention(const Op &op) {
  return op.getKind() == OpKind::Attention ||
         (op.getKind() == OpKind::Grad &&
          getGradForwardKind(op) == OpKind::Attention);
}

bool OpNumberCache::checkWindow(const Op &op, llvm::StringRef what) {
  const Attribute *mask = op.getAttr("mask");
  if (!isAttention(op) || !mask || !isWindowedMask(mask->text))
    return true;
  const Expr &window = op.getAttr("window")->expr;
  std::optional<int64_t> positions =
      evaluate(window, op.getLoc(), ("window of " + what).str(), false);
  if (!positions)
    return false;
  if (*positions >= 1)
    return true;
  diags->error(op.getLoc(), "cannot instantiate the window of " + what + ", " +
                                module.getPrinter().str(window) +
                                ": it is 0, not a positive number of "
                                "positions, with " +
                                module.describeBindings(window));
  return false;
}

OpNumberCache::Formulas &OpNumberCache::getFormulas(const Op &op) {
  auto [it, inserted] = formulas.try_emplace(&op);
  Formulas &costs = it->second;
  if (inserted) {
    bool collective = op.getInfo().has(Collective);
    costs.flops = collective ? Expr(0) : getFlops(op);
    costs.bytes = collective ? op.getAttr("bytes")->expr : getBytesAccessed(op);
    costs.castBytes = collective ? Expr(0) : getCastBytes(op);
    costs.flopsProgram = CompiledExpr::compile(costs.flops, slots);
    costs.bytesProgram = CompiledExpr::compile(costs.bytes, slots);
    costs.castBytesProgram = CompiledExpr::compile(costs.castBytes, slots);
    bool linear = isLinearGemm(op);
    costs.inputBytes = linear ? getGemmInputBytes(op) : Expr(0);
    costs.inputCastBytes = linear ? getGemmInputCastBytes(op) : Expr(0);
    costs.inputBytesProgram = CompiledExpr::compile(costs.inputBytes, slots);
    costs.inputCastBytesProgram =
        CompiledExpr::compile(costs.inputCastBytes, slots);
    costs.attentionRows = collective ? Expr(0) : getAttentionQueryRows(op);
    costs.attentionRowsProgram =
        CompiledExpr::compile(costs.attentionRows, slots);
    costs.attentionExps = collective ? Expr(0) : getAttentionExponentials(op);
    costs.attentionExpsProgram =
        CompiledExpr::compile(costs.attentionExps, slots);
    costs.expertReads = getExpertWeightReads(op);
    if (costs.expertReads) {
      const ExpertWeightReads &reads = *costs.expertReads;
      const Expr *parts[] = {&reads.weightBytes, &reads.tokens, &reads.topk,
                             &reads.experts};
      for (unsigned index = 0; index < 4; ++index)
        costs.expertPrograms[index] =
            CompiledExpr::compile(*parts[index], slots);
    }
    if (!isTraining())
      costs.slotFill = stg::getSlotFill(op);
    if (costs.slotFill) {
      costs.slotFillPrograms[0] =
          CompiledExpr::compile(costs.slotFill->copies, slots);
      costs.slotFillPrograms[1] =
          CompiledExpr::compile(costs.slotFill->rows, slots);
      if (costs.slotFill->slotBytes)
        costs.slotBytesProgram =
            CompiledExpr::compile(*costs.slotFill->slotBytes, slots);
    }
  }
  return costs;
}

std::optional<double>
OpNumberCache::tryCompiledNumber(const CompiledExpr &program) {
  std::optional<Rational> value = tryCompiled(program);
  if (!value || value->den <= 0)
    return std::nullopt;
  return double(value->num) / double(value->den);
}

std::pair<uint64_t, uint64_t>
OpNumberCache::getExpertWeightBytes(const Formulas &costs) {
  if (!costs.expertReads)
    return {0, 0};
  double values[4];
  for (unsigned index = 0; index < 4; ++index) {
    std::optional<double> value =
        tryCompiledNumber(costs.expertPrograms[index]);
    if (!value)
      return {0, 0};
    values[index] = *value;
  }
  auto [weightBytes, tokens, topk, experts] = values;
  if (!(weightBytes >= 0) || !std::isfinite(weightBytes))
    return {0, 0};
  double unread =
      weightBytes * (1 - getActiveExpertFraction(tokens, topk, experts));
  // Whole bytes, and none where the experts all get tokens (a training
  // step's): the estimate is the same as before for those.
  return {uint64_t(weightBytes),
          unread >= 1 && std::isfinite(unread) ? uint64_t(unread) : 0};
}

bool OpNumberCache::isTraining() {
  if (!training) {
    training = false;
    if (const Graph *model = module.getModel())
      model->walk([&](const Op &op) {
        if (op.getPhase() == Phase::Backward)
          training = true;
      });
  }
  return *training;
}

double OpNumberCache::getSlotFill(const Formulas &costs) {
  if (!costs.slotFill)
    return 1;
  std::optional<double> copies = tryCompiledNumber(costs.slotFillPrograms[0]);
  std::optional<double> rows = tryCompiledNumber(costs.slotFillPrograms[1]);
  return copies && rows ? getSlotFillFraction(*copies, *rows) : 1;
}

/// `count` for the rows of it that hold tokens: unchanged where all do (a
/// training step's slots, whose estimate stays the same), else rounded up.
static int64_t getFilled(int64_t count, double fill) {
  if (fill >= 1)
    return count;
  return int64_t(std::ceil(double(count) * fill));
}

/// The precision of an op the `precision` pass left alone: its result's
/// element type, with fp32 products (einsums, attention) on tf32 tensor
/// cores; bf16 for the rest, whose FLOPs run on the vector units.
static Precision getDefaultPrecision(const Op &op) {
  if (op.getResults().empty() || !op.getResult()->hasType())
    return Precision::BF16;
  switch (op.getResult()->getType().getElementType()) {
  case ElementType::FP32:
    return op.getKind() == OpKind::Einsum || isAttention(op) ? Precision::TF32
                                                             : Precision::BF16;
  case ElementType::FP16:
    return Precision::FP16;
  default:
    return Precision::BF16;
  }
}

const OpNumbers *OpNumberCache::get(const Op &op) {
  const OpNumbers *own = getOwn(op);
  // Only where the model asks (`linear_kernels`, inference only): the
  // serving clock's fitted constant was set with a kernel per GEMM.
  if (!fusedLinearKernels)
    fusedLinearKernels = module.hasFusedLinearKernels();
  if (!own || !own->gemm.isGemm() || !*fusedLinearKernels || isTraining() ||
      !kernelsShared.insert(&op).second)
    return own;
  OpNumbers numbers = *own;
  if (!addSharedKernel(op, numbers))
    return nullptr;
  // The siblings' numbers may have grown the map: find the entry again.
  std::optional<OpNumbers> &entry = ops[&op];
  entry = numbers;
  return &*entry;
}

llvm::ArrayRef<const Op *> OpNumberCache::getKernelSiblings(const Op &op) {
  if (!kernelSiblings) {
    kernelSiblings.emplace();
    if (const Graph *model = module.getModel()) {
      llvm::DenseMap<const Value *, llvm::SmallVector<const Op *, 4>> byInput;
      model->walk([&](const Op &gemm) {
        if (isLinearGemm(gemm))
          byInput[gemm.getOperand(0)].push_back(&gemm);
      });
      for (const auto &[input, readers] : byInput)
        for (const Op *gemm : readers) {
          llvm::SmallVector<const Op *, 4> group;
          for (const Op *other : readers)
            if (canShareKernel(*gemm, *other))
              group.push_back(other);
          if (group.size() > 1)
            (*kernelSiblings)[gemm] = std::move(group);
        }
    }
  }
  auto found = kernelSiblings->find(&op);
  if (found == kernelSiblings->end())
    return {};
  return found->second;
}

/// `a + b`, saturating at INT64_MAX (sums of counts that each fit).
static int64_t addCounts(int64_t a, int64_t b) {
  uint64_t sum = llvm::SaturatingAdd(uint64_t(a), uint64_t(b));
  return int64_t(std::min<uint64_t>(sum, std::numeric_limits<int64_t>::max()));
}

bool OpNumberCache::addSharedKernel(const Op &op, OpNumbers &numbers) {
  llvm::ArrayRef<const Op *> siblings = getKernelSiblings(op);
  if (siblings.size() < 2)
    return true;
  const Formulas &costs = getFormulas(op);
  auto bytes = [&](const Expr &formula,
                   const CompiledExpr &program) -> std::optional<int64_t> {
    if (std::optional<int64_t> value = tryEvaluate(formula, program, true))
      return value;
    return evaluate(formula, op.getLoc(), "input bytes of an einsum", true);
  };
  std::optional<int64_t> input =
      bytes(costs.inputBytes, costs.inputBytesProgram);
  std::optional<int64_t> cast =
      bytes(costs.inputCastBytes, costs.inputCastBytesProgram);
  if (!input || !cast)
    return false;
  // The input's rows on an experts' slots are filled as the GEMM's are.
  double fill = getSlotFill(costs);
  int64_t sharedCast = getFilled(*cast, fill);
  int64_t shared = addCounts(getFilled(*input, fill), sharedCast);
  SharedKernel kernel;
  kernel.gemm = numbers.gemm;
  kernel.gemm.n = 0;
  int64_t bytesAccessed = shared, castBytes = sharedCast;
  for (const Op *sibling : siblings) {
    const OpNumbers *other = sibling == &op ? &numbers : getOwn(*sibling);
    if (!other)
      return false;
    // Another matrix shape (another slice of the input): no shared kernel.
    const GemmShape &gemm = other->gemm;
    if (gemm.batch != numbers.gemm.batch || gemm.m != numbers.gemm.m ||
        gemm.k != numbers.gemm.k)
      return true;
    kernel.gemm.n = addCounts(kernel.gemm.n, gemm.n);
    kernel.flops = addCounts(kernel.flops, other->flops);
    // Each sibling's numbers hold the input and its cast; the kernel's,
    // once in all.
    bytesAccessed =
        addCounts(bytesAccessed,
                  int64_t(other->bytesAccessed -
                          std::min<uint64_t>(shared, other->bytesAccessed)));
    castBytes = addCounts(
        castBytes, int64_t(other->castBytes -
                           std::min<uint64_t>(sharedCast, other->castBytes)));
  }
  kernel.bytes = bytesAccessed;
  kernel.castBytes = castBytes;
  numbers.kernel = kernel;
  return true;
}

const OpNumbers *OpNumberCache::getOwn(const Op &op) {
  auto [it, inserted] = ops.try_emplace(&op);
  if (!inserted)
    return it->second ? &*it->second : nullptr;
  OpNumbers numbers;
  // The kind and the name, so that one op among a layer's is found; made
  // only for a message.
  auto describe = [&] {
    std::string what = ("'" + op.getKindName() + "'").str();
    if (!op.getResults().empty())
      what += " '%" + op.getResults().front()->getName().str() + "'";
    return what;
  };
  // Block scales make a low-precision operand's bytes a fraction (1/32
  // byte an element): rounded up, as the attention's averages are.
  std::optional<Precision> lowPrecision = getLowPrecision(op);
  bool roundUp = isAttention(op) || lowPrecision;
  if (roundUp && !checkWindow(op, describe()))
    return nullptr;
  auto count = [&](const Expr &formula, const CompiledExpr &program,
                   const char *quantity,
                   bool averaged) -> std::optional<int64_t> {
    if (std::optional<int64_t> value = tryEvaluate(formula, program, averaged))
      return value;
    return evaluate(formula, op.getLoc(), quantity + describe(), averaged);
  };
  const Formulas &costs = getFormulas(op);
  if (op.getInfo().has(Collective)) {
    std::optional<int64_t> bytes =
        count(costs.bytes, costs.bytesProgram, "size of ", false);
    if (!bytes)
      return nullptr;
    // The slots a decode step's few tokens leave empty are not moved.
    numbers.commBytes = getFilled(*bytes, getSlotFill(costs));
  } else {
    std::optional<int64_t> flops =
        count(costs.flops, costs.flopsProgram, "FLOPs of ", roundUp);
    std::optional<int64_t> bytes =
        count(costs.bytes, costs.bytesProgram, "bytes of ", roundUp);
    if (!flops || !bytes)
      return nullptr;
    // An op on an experts' slots computes, reads and writes the rows that
    // hold tokens, and a grouped GEMM reads the weights of the experts that
    // got tokens, whole; a dispatch writes and a combine reads the slots
    // beside whole tokens, which they do not compute on.
    double fill = getSlotFill(costs);
    auto [weightBytes, unreadBytes] = getExpertWeightBytes(costs);
    int64_t slotBytes = *bytes - std::min<int64_t>(weightBytes, *bytes);
    bool boundary = costs.slotFill && costs.slotFill->slotBytes;
    if (boundary && fill < 1) {
      std::optional<int64_t> written =
          count(*costs.slotFill->slotBytes, costs.slotBytesProgram,
                "slot bytes of ", false);
      if (!written)
        return nullptr;
      slotBytes = std::min(*written, *bytes);
    }
    numbers.flops = boundary ? *flops : getFilled(*flops, fill);
    numbers.bytesAccessed = *bytes - slotBytes -
                            std::min<int64_t>(unreadBytes, *bytes - slotBytes) +
                            getFilled(slotBytes, fill);
    if (op.getKind() == OpKind::Einsum)
      numbers.gemm = getGemmShape(op);
    if (isAttention(op)) {
      std::optional<int64_t> rows =
          count(costs.attentionRows, costs.attentionRowsProgram,
                "query rows of ", false);
      std::optional<int64_t> exps =
          count(costs.attentionExps, costs.attentionExpsProgram,
                "exponentials of ", true);
      if (!rows || !exps)
        return nullptr;
      numbers.attentionRows = *rows;
      numbers.attentionExps = *exps;
    }
    numbers.precision =
        lowPrecision ? *lowPrecision : getDefaultPrecision(op);
    if (lowPrecision) {
      std::optional<int64_t> castBytes =
          count(costs.castBytes, costs.castBytesProgram, "cast bytes of ",
                true);
      if (!castBytes)
        return nullptr;
      numbers.castBytes = getFilled(*castBytes, fill);
    }
  }
  it->second = numbers;
  return &*it->second;
}

std::optional<int64_t> OpNumberCache::getLocalBytes(const Value &value,
                                                    SourceLoc loc) {
  auto [it, inserted] = values.try_emplace(&value);
  if (inserted) {
    auto [formula, fresh] = valueBytes.try_emplace(&value);
    auto &[bytes, program] = formula->second;
    if (fresh) {
      bytes = stg::getLocalBytes(value);
      program = CompiledExpr::compile(bytes, slots);
    }
    it->second = tryEvaluate(bytes, program, false);
    if (!it->second)
      it->second = evaluate(bytes, loc,
                            "size of '%" + value.getName().str() + "'", false);
  }
  return it->second;
}
