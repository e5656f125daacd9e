//===- Module.cpp - A whole STG program -----------------------------------===//

#include "stg/IR/Module.h"

#include <utility>

using namespace stg;

Module::Module() = default;

Dim *Module::addDim(llvm::StringRef name, SourceLoc loc) {
  dims.push_back(std::make_unique<Dim>(
      Dim{name.str(), symbols.getOrCreate(name), std::nullopt, loc}));
  return dims.back().get();
}

Dim *Module::lookupDim(llvm::StringRef name) {
  for (auto &dim : dims)
    if (dim->name == name)
      return dim.get();
  return nullptr;
}

Axis *Module::addAxis(llvm::StringRef name, SourceLoc loc) {
  auto axis = std::make_unique<Axis>();
  axis->name = name.str();
  axis->degree = symbols.getOrCreate(name);
  axis->loc = loc;
  axes.push_back(std::move(axis));
  return axes.back().get();
}

Axis *Module::lookupAxis(llvm::StringRef name) {
  for (auto &axis : axes)
    if (axis->name == name)
      return axis.get();
  return nullptr;
}

const Axis *Module::lookupAxis(llvm::StringRef name) const {
  return const_cast<Module *>(this)->lookupAxis(name);
}

Option *Module::addOption(llvm::StringRef name, Option::Value value,
                          SourceLoc loc) {
  options.push_back(
      std::make_unique<Option>(Option{name.str(), std::move(value), loc}));
  return options.back().get();
}

const Option *Module::lookupOption(llvm::StringRef name) const {
  for (const auto &option : options)
    if (option->name == name)
      return option.get();
  return nullptr;
}

Option *Module::lookupOption(llvm::StringRef name) {
  return const_cast<Option *>(std::as_const(*this).lookupOption(name));
}

ElementType Module::getDefaultElementType() const {
  if (elementTypeOverride)
    return *elementTypeOverride;
  for (const auto &option : options)
    if (option->name == "dtype")
      if (auto *text = std::get_if<std::string>(&option->value))
        if (auto type = parseElementType(*text))
          return *type;
  return ElementType::BF16;
}

std::optional<Precision> Module::getPrecisionRecipe() const {
  const Option *option = lookupOption("precision");
  const auto *text = option ? std::get_if<std::string>(&option->value) : nullptr;
  return text ? parseRecipe(*text) : std::nullopt;
}

bool Module::hasContextParallelAllToAll() const {
  const Option *option = lookupOption("cp_comm_type");
  const auto *text = option ? std::get_if<std::string>(&option->value) : nullptr;
  return text && *text == "a2a";
}

bool Module::hasFusedLinearKernels() const {
  const Option *option = lookupOption("linear_kernels");
  const auto *text =
      option ? std::get_if<std::string>(&option->value) : nullptr;
  return text && *text == "fused";
}

Graph *Module::createModel(llvm::StringRef name, SourceLoc loc) {
  model = std::make_unique<Graph>(name.str());
  modelLoc = loc;
  return model.get();
}

std::string Module::makeUniqueName(llvm::StringRef base) {
  unsigned &count = nameCounts[base];
  if (count++ == 0)
    return base.str();
  // A suffixed name may collide with one the user wrote; keep counting.
  while (true) {
    std::string candidate = (base + "_" + llvm::Twine(count - 1)).str();
    if (nameCounts.try_emplace(candidate, 1).second)
      return candidate;
    ++count;
  }
}

std::optional<Expr> Module::bindDims(const Expr &e) const {
  GiNaC::exmap values;
  for (const auto &dim : dims)
    if (dim->value)
      values[dim->symbol] = *dim->value;
  // Each dim refers only to earlier ones, so dims.size() rounds suffice.
  Expr bound = e;
  for (size_t i = 0; i <= dims.size(); ++i) {
    std::optional<Expr> next = trySubstitute(bound, values);
    if (!next)
      return std::nullopt;
    if (next->is_equal(bound))
      break;
    bound = *next;
  }
  return bound;
}

void Module::replaceUsesOf(Value *from, Value *to, const Op *except) {
  if (model)
    model->replaceUsesOf(from, to, except);
  for (auto &entry : gradients)
    if (entry.second == from)
      entry.second = to;
}

static long long getDegree(const Axis &axis) {
  const Axis *ranks = axis.resolve();
  return ranks && ranks->size ? *ranks->size : 1;
}

const Module::BindingCache &Module::getBindings() const {
  auto unchanged = [&] {
    if (!bindings || bindings->dimValues.size() != dims.size() ||
        bindings->degrees.size() != axes.size())
      return false;
    for (size_t index = 0; index < dims.size(); ++index) {
      const std::optional<Expr> &was = bindings->dimValues[index];
      const std::optional<Expr> &is = dims[index]->value;
      if (was.has_value() != is.has_value() || (is && !was->is_equal(*is)))
        return false;
    }
    for (size_t index = 0; index < axes.size(); ++index)
      if (bindings->degrees[index] != getDegree(*axes[index]))
        return false;
    return true;
  };
  if (unchanged())
    return *bindings;
  BindingCache cache;
  cache.usable = true;
  GiNaC::exmap degrees;
  for (const auto &axis : axes) {
    cache.degrees.push_back(getDegree(*axis));
    degrees[axis->degree] = cache.degrees.back();
  }
  for (const auto &dim : dims) {
    cache.dimValues.push_back(dim->value);
    if (!dim->value)
      continue;
    std::optional<Expr> value = bindDims(dim->symbol);
    if (value)
      value = trySubstitute(*value, degrees);
    if (!value)
      cache.usable = false;
    else
      cache.resolved[dim->symbol] = *value;
  }
  cache.resolved.insert(degrees.begin(), degrees.end());
  bindings = std::move(cache);
  return *bindings;
}

std::optional<Expr> Module::bindAll(const Expr &e) const {
  const BindingCache &cache = getBindings();
  if (cache.usable)
    return trySubstitute(e, cache.resolved);
  GiNaC::exmap degrees;
  for (const auto &axis : axes)
    degrees[axis->degree] = getDegree(*axis);
  std::optional<Expr> bound = bindDims(e);
  return bound ? trySubstitute(*bound, degrees) : std::nullopt;
}

std::vector<std::optional<Expr>> Module::bindAllDims() const {
  std::vector<std::optional<Expr>> values;
  const BindingCache &cache = getBindings();
  for (const auto &dim : dims) {
    if (!cache.usable) {
      values.push_back(bindAll(dim->symbol));
      continue;
    }
    // What substituting the symbol gives: its value, or itself.
    auto found = cache.resolved.find(dim->symbol);
    values.push_back(found == cache.resolved.end() ? Expr(dim->symbol)
                                                   : found->second);
  }
  return values;
}

std::optional<long long> Module::getDimValue(llvm::StringRef name) const {
  const Dim *dim = lookupDim(name);
  if (!dim)
    return std::nullopt;
  std::optional<Expr> value = bindAll(dim->symbol);
  return value ? getIntegerValue(*value) : std::nullopt;
}

std::string Module::describeBindings(const Expr &e) const {
  std::set<std::string> names = getSymbolNames(e);
  std::string text;
  auto add = [&](llvm::StringRef name, const Expr &value) {
    text += (text.empty() ? "" : ", ") + name.str() + " = " +
            getPrinter().str(value);
  };
  for (const auto &dim : dims)
    if (names.count(dim->name) && dim->value)
      if (std::optional<Expr> value = bindDims(dim->symbol))
        add(dim->name, *value);
  for (const auto &axis : axes)
    if (names.count(axis->degree.get_name())) {
      const Axis *ranks = axis->resolve();
      add(axis->degree.get_name(), ranks && ranks->size ? *ranks->size : 1);
    }
  return text;
}
