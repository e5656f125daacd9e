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
#include <vector>

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

/// The slowest --request-rate: one request every 1000 s. A rate near 0
/// would put arrivals, and every time after them, where a microsecond is
/// below a double's precision.
inline constexpr double MinRequestRate = 1e-3;

/// `--request-rate`: requests per second from MinRequestRate to 10^9, or
/// `inf` (every request queued at once); parseRequestRate reads it.
inline CLI::Validator requestRate() {
  return CLI::Validator(
      [](std::string &input) -> std::string {
        double rate = 0;
        if (input == "inf" || (!llvm::StringRef(input).getAsDouble(rate) &&
                               rate >= MinRequestRate && rate <= 1e9))
          return "";
        return "expects requests per second from 0.001 to 1e9, or inf, "
               "found '" +
               input + "'";
      },
      "R");
}

/// A --request-rate that requestRate() accepted, as a number.
inline double parseRequestRate(llvm::StringRef text) {
  double rate = INFINITY;
  if (text != "inf")
    text.getAsDouble(rate);
  return rate;
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

/// Appends each `--set NAME=VALUE` of `sets` to `overrides`; the message
/// for the first that is not one, if any.
inline std::optional<std::string>
appendAssignments(const std::vector<std::string> &sets,
                  std::vector<std::pair<std::string, std::string>> &overrides) {
  for (const std::string &set : sets) {
    std::optional<std::pair<std::string, std::string>> assignment =
        parseAssignment(set);
    if (!assignment)
      return "--set expects NAME=VALUE, found '" + set + "'";
    overrides.push_back(std::move(*assignment));
  }
  return std::nullopt;
}

/// `--deepep-mode` (parseDeepEpMode reads it), as stagec, stage-search and
/// its --serve take it; each says what it does in its own `help`.
inline CLI::Option *addDeepEpModeOption(CLI::App &app, std::string &mode,
                                        const std::string &help) {
  return app.add_option("--deepep-mode", mode, help)
      ->check(CLI::IsMember({"off", "normal", "low-latency", "auto"}));
}

/// `--deepep-sms`, as stagec, stage-search and its --serve take it: the
/// SMs DeepEP's normal kernels hold while they run (CompileOptions).
inline CLI::Option *addDeepEpUnitsOption(CLI::App &app, uint16_t &units) {
  return app
      .add_option("--deepep-sms", units,
                  "the SMs DeepEP's normal kernels hold while they move "
                  "tokens, which compute beside them runs without (default "
                  "20, DeepEP's and Megatron's; 0: none)")
      ->check(CLI::Range(0, 1024));
}

/// What is wrong with `--deepep-sms` beside `--deepep-mode MODE`, if
/// anything: only the normal kernels hold SMs.
inline std::optional<std::string>
checkDeepEpUnitsOption(const CLI::App &app, const std::string &mode) {
  if (app.count("--deepep-sms") && mode != "normal" && mode != "auto")
    return std::string("--deepep-sms is the SMs DeepEP's normal kernels "
                       "hold: it needs --deepep-mode normal or auto");
  return std::nullopt;
}

/// `--version`: prints `TOOL VERSION` and exits 0.
inline void addVersionFlag(CLI::App &app, const std::string &tool) {
  app.set_version_flag("--version", tool + " " + getToolVersion().str(),
                       "print the version and exit");
}

/// Errors as `TOOL: error: MESSAGE`, then where help is.
inline void useToolErrorFormat(CLI::App &app, const std::string &tool) {
  app.failure_message([tool](const CLI::App *, const CLI::Error &error) {
    return tool + ": error: " + error.what() + "\n" + tool +
           ": run with --help for the flags\n";
  });
}

/// Parses the command line, errors in the tool's format: the exit status
/// when the tool is to stop there (0 after --help or --version, 1 on an
/// error), nothing when it goes on.
inline std::optional<int> parseCommandLine(CLI::App &app,
                                           const std::string &tool, int argc,
                                           char **argv) {
  useToolErrorFormat(app, tool);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? 0 : 1;
  }
  return std::nullopt;
}

} // namespace stg

#endif // STG_TOOLS_COMMON_COMMANDLINE_H
