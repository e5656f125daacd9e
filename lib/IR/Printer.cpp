//===- Printer.cpp - Textual form of the STG IR ---------------------------===//

#include "stg/IR/Printer.h"
#include "stg/IR/Module.h"

#include "llvm/ADT/STLExtras.h"

#include <optional>

using namespace stg;

namespace {

class IRPrinter {
public:
  IRPrinter(llvm::raw_ostream &os, const Module &module,
            const PrintOptions &options)
      : os(os), module(module), options(options),
        exprs(module.getPrinter()) {}

  void printDeclarations();
  void printGraph(const Graph &graph, unsigned indent);
  void printOp(const Op &op, unsigned indent);

private:
  void printType(const Value &value);
  void printOptionValue(const Option::Value &value);

  llvm::raw_ostream &os;
  const Module &module;
  const PrintOptions &options;
  ExprPrinter exprs;
};

} // namespace

void IRPrinter::printOptionValue(const Option::Value &value) {
  if (auto *flag = std::get_if<bool>(&value))
    os << (*flag ? "true" : "false");
  else if (auto *expr = std::get_if<Expr>(&value))
    exprs.print(os, *expr);
  else {
    os << '"';
    os.write_escaped(std::get<std::string>(value));
    os << '"';
  }
}

void IRPrinter::printDeclarations() {
  for (const auto &dim : module.getDims()) {
    os << "dim " << dim->name;
    if (dim->value) {
      os << " = ";
      exprs.print(os, *dim->value);
    }
    os << '\n';
  }
  for (const auto &axis : module.getAxes()) {
    os << "axis " << axis->name;
    if (axis->alias) {
      os << " = " << axis->alias->name;
      if (!axis->condition.empty())
        os << " if " << (axis->negated ? "!" : "") << axis->condition
           << (axis->active ? "  // on" : "  // off: degree 1");
    }
    if (axis->size)
      os << "  // degree " << *axis->size;
    os << '\n';
  }
  for (const auto &option : module.getOptions()) {
    os << "option " << option->name << " = ";
    printOptionValue(option->value);
    os << '\n';
  }
  for (const BlockSignature &block : module.getBlockSignatures()) {
    os << "block " << block.name << '(';
    llvm::interleaveComma(block.params, os, [&](const auto &param) {
      os << param.first << ": ";
      param.second.print(os, exprs);
    });
    os << ')';
    if (block.result) {
      os << " -> ";
      block.result->print(os, exprs);
    }
    os << '\n';
  }
}

void IRPrinter::printType(const Value &value) {
  if (value.hasType())
    value.getType().print(os, exprs);
  else
    os << '?';
}

void IRPrinter::printGraph(const Graph &graph, unsigned indent) {
  // A body of several layers says where each begins.
  std::optional<unsigned> layer;
  for (const auto &op : graph.getOps()) {
    if (graph.getNumLayers() > 1 && op->getKind() != OpKind::Yield &&
        layer != op->getBodyLayer()) {
      layer = op->getBodyLayer();
      os.indent(indent) << "// layer " << *layer << " of "
                        << graph.getNumLayers() << "\n";
    }
    printOp(*op, indent);
  }
}

void IRPrinter::printOp(const Op &op, unsigned indent) {
  os.indent(indent);
  if (!op.getResults().empty()) {
    llvm::interleaveComma(op.getResults(), os,
                          [&](Value *v) { os << '%' << v->getName(); });
    os << " = ";
  }
  os << op.getKindName();

  if (!op.getAttrs().empty()) {
    os << '[';
    // An einsum's spec is written bare, as in the source; other
    // attributes (a precision) by name.
    bool einsum = op.getKind() == OpKind::Einsum;
    llvm::interleaveComma(op.getAttrs(), os, [&](const NamedAttribute &attr) {
      if (!einsum || attr.name != "spec")
        os << attr.name << '=';
      attr.value.print(os, exprs);
    });
    os << ']';
  }

  const Graph *body = op.getBody();
  if (const Op *forward = op.getForwardRepeat()) {
    os << " reverse_of(";
    if (forward->getResults().empty())
      forward->getAttr("name")->print(os, exprs);
    else
      os << '%' << forward->getResult(0)->getName();
    os << ')';
  }
  if (body) {
    os << " iter_args(";
    for (unsigned i = 0; i < body->getArguments().size(); ++i) {
      if (i)
        os << ", ";
      os << '%' << body->getArguments()[i]->getName() << " = %"
         << op.getOperand(i)->getName();
    }
    os << ')';
  } else {
    os << '(';
    llvm::interleaveComma(op.getOperands(), os,
                          [&](Value *v) { os << '%' << v->getName(); });
    os << ')';
  }

  if (!op.getResults().empty() && op.getKind() != OpKind::Repeat) {
    os << " : ";
    llvm::interleaveComma(op.getResults(), os,
                          [&](Value *v) { printType(*v); });
  }
  if (options.printLocations && op.getLoc().isValid())
    os << " loc(" << op.getLoc().file << ':' << op.getLoc().line << ':'
       << op.getLoc().col << ')';
  if (body) {
    os << " {\n";
    printGraph(*body, indent + 2);
    os.indent(indent) << '}';
  }
  os << '\n';
}

void stg::printModule(llvm::raw_ostream &os, const Module &module,
                      const PrintOptions &options) {
  IRPrinter printer(os, module, options);
  printer.printDeclarations();
  if (const Graph *model = module.getModel()) {
    os << "\nmodel " << model->getName() << " {\n";
    printer.printGraph(*model, 2);
    os << "}\n";
  }
  if (const auto &memory = module.getMemory()) {
    ExprPrinter exprs = module.getPrinter();
    os << "\n// memory per rank (bytes):\n";
    for (auto [name, bytes] :
         {std::pair{"weights", memory->weights}, {"gradients", memory->gradients},
          {"optimizer", memory->optimizer}, {"activations", memory->activations},
          {"state", memory->state}, {"total", memory->total()}})
      os << "//   " << name << " = " << exprs.str(bytes) << '\n';
  }
}

void stg::printOp(llvm::raw_ostream &os, const Module &module, const Op &op,
                  const PrintOptions &options, unsigned indent) {
  IRPrinter(os, module, options).printOp(op, indent);
}
