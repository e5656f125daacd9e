//===- CommandLine.h - What the tools' command lines share ------*- C++ -*-===//
//
// CLI11 validators that check every number where it is read, with messages
// in the tools' own words, and the error format all tools share:
// `TOOL: error: --flag: what was wrong`. Header-only: the tools are thin
// drivers and this is the only code they have in common.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TOOLS_COMMON_COMMANDLINE_H
#define STG_TOOLS_COMMON_COMMANDLINE_H

#include "stg/Support/Version.h"

#include "CLI/CLI.hpp"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>

namespace stg {

/// A whole number from `min` to `max`, written in decimal digits only (no
/// sign, so `-1` is not read as 2^64 - 1).
inline CLI::Validator wholeNumber(uint64_t min, uint64_t max) {
  return CLI::Validator(
      [=](std::string &input) -> std::string {
        uint64_t value = 0;
        llvm::StringRef text(input);
        bool digits = !text.empty() && llvm::all_of(text, llvm::isDigit);
        if (digits && !text.getAsInteger(10, value) && value >= min &&
            value <= max)
          return "";
        return "expects a whole number from " + std::to_string(min) + " to " +
               std::to_string(max) + ", found '" + input + "'";
      },
      "N");
}

/// A finite number from `min` to `max` (no NaN, no infinity).
inline CLI::Validator finiteNumber(double min, double max) {
  return CLI::Validator(
      [=](std::string &input) -> std::string {
        double value = 0;
        if (!llvm::StringRef(input).getAsDouble(value) &&
            std::isfinite(value) && value >= min && value <= max)
          return "";
        auto show = [](double x) {
          char text[32];
          std::snprintf(text, sizeof text, "%g", x);
          return std::string(text);
        };
        return "expects a number from " + show(min) + " to " + show(max) +
               ", found '" + input + "'";
      },
      "X");
}

/// `--set NAME=VALUE` split into its name and value; nothing if either is
/// empty or there is no `=`.
inline std::optional<std::pair<std::string, std::string>>
parseAssignment(llvm::StringRef text) {
  auto [name, value] = text.split('=');
  if (name.empty() || value.empty() || !text.contains('='))
    return std::nullopt;
  return std::make_pair(name.str(), value.str());
}

/// Errors as `TOOL: error: MESSAGE`, then where help is.
/// `--version`: prints `TOOL VERSION` and exits 0.
inline void addVersionFlag(CLI::App &app, const std::string &tool) {
  app.set_version_flag("--version", tool + " " + getToolVersion().str(),
                       "print the version and exit");
}

inline void useToolErrorFormat(CLI::App &app, const std::string &tool) {
  app.failure_message([tool](const CLI::App *, const CLI::Error &error) {
    return tool + ": error: " + error.what() + "\n" + tool +
           ": run with --help for the flags\n";
  });
}

} // namespace stg

#endif // STG_TOOLS_COMMON_COMMANDLINE_H
