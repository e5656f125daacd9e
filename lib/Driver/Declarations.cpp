//===- Declarations.cpp - What a model lets its user set ------------------===//
//
// Comments are not in the IR (the lexer skips them), so they are read back
// from the source line each declaration's location points at.
//
//===----------------------------------------------------------------------===//

#include "stg/Driver/Declarations.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"

#include <algorithm>

using namespace stg;

/// The text of the comment in `line`, if any: after a `//` outside a string.
static std::optional<llvm::StringRef> getLineComment(llvm::StringRef line) {
  bool quoted = false;
  for (size_t i = 0; i + 1 < line.size(); ++i) {
    if (line[i] == '"')
      quoted = !quoted;
    else if (!quoted && line[i] == '/' && line[i + 1] == '/')
      return line.substr(i + 2).trim();
  }
  return std::nullopt;
}

std::string stg::getDeclarationComment(const DiagnosticEngine &sources,
                                       SourceLoc loc) {
  const llvm::MemoryBuffer *buffer = sources.getSource(loc.file);
  if (!buffer || !loc.isValid())
    return "";
  llvm::SmallVector<llvm::StringRef, 0> lines;
  buffer->getBuffer().split(lines, '\n');
  if (loc.line > lines.size())
    return "";
  std::optional<llvm::StringRef> comment = getLineComment(lines[loc.line - 1]);
  if (!comment)
    return "";
  std::string text = comment->str();
  // Continuations: indented lines holding only a comment.
  for (size_t next = loc.line; next < lines.size(); ++next) {
    llvm::StringRef line = lines[next];
    llvm::StringRef body = line.ltrim();
    if (body.size() == line.size() || !body.startswith("//"))
      break;
    text += " " + body.drop_front(2).trim().str();
  }
  return text;
}

namespace {

/// One line of a table: the name, its value, the rest.
struct Row {
  std::string name, value, comment, where;
};

void printRows(llvm::raw_ostream &os, llvm::StringRef title,
               const std::vector<Row> &rows) {
  if (rows.empty())
    return;
  size_t nameWidth = 0, valueWidth = 0;
  for (const Row &row : rows) {
    nameWidth = std::max(nameWidth, row.name.size());
    valueWidth = std::max(valueWidth, row.value.size());
  }
  os << title << ":\n";
  for (const Row &row : rows) {
    os << "  " << llvm::left_justify(row.name, nameWidth) << "  "
       << llvm::left_justify(row.value, valueWidth) << "  " << row.where;
    if (!row.comment.empty())
      os << "  // " << row.comment;
    os << "\n";
  }
}

std::string describeLoc(SourceLoc loc) {
  if (!loc.isValid())
    return "(command line)";
  return (llvm::sys::path::filename(loc.file) + ":" + llvm::Twine(loc.line))
      .str();
}

} // namespace

void stg::printDeclarations(llvm::raw_ostream &os, const Module &module,
                            const DiagnosticEngine &sources) {
  ExprPrinter printer = module.getPrinter();
  std::vector<Row> dims;
  for (const auto &dim : module.getDims()) {
    Row row{dim->name, "", getDeclarationComment(sources, dim->loc),
            describeLoc(dim->loc)};
    if (!dim->value) {
      row.value = "(none: --set " + dim->name + "=N)";
    } else {
      std::string declared = printer.str(*dim->value);
      std::optional<Expr> bound = module.bindAll(dim->symbol);
      std::string value = bound ? printer.str(*bound) : "(divides by zero)";
      row.value = declared == value ? value : declared + " = " + value;
    }
    dims.push_back(std::move(row));
  }
  std::vector<Row> options;
  for (const auto &option : module.getOptions()) {
    std::string value;
    if (const bool *flag = std::get_if<bool>(&option->value))
      value = *flag ? "true" : "false";
    else if (const Expr *number = std::get_if<Expr>(&option->value))
      value = printer.str(*number);
    else
      value = "\"" + std::get<std::string>(option->value) + "\"";
    options.push_back({option->name, value,
                       getDeclarationComment(sources, option->loc),
                       describeLoc(option->loc)});
  }
  std::vector<Row> axes;
  for (const auto &axis : module.getAxes()) {
    const Axis *ranks = axis->resolve();
    std::string degree = std::to_string(ranks && ranks->size ? *ranks->size
                                                             : 1);
    std::string value = degree;
    if (axis->alias) {
      value = "= " + axis->alias->name;
      if (!axis->condition.empty())
        value += std::string(" if ") + (axis->negated ? "!" : "") +
                 axis->condition + (axis->active ? " (on)" : " (off)");
      value += ": " + degree;
    }
    axes.push_back({axis->name, value, getDeclarationComment(sources, axis->loc),
                    describeLoc(axis->loc)});
  }
  printRows(os, "dims", dims);
  printRows(os, "options", options);
  printRows(os, "axes", axes);
}
