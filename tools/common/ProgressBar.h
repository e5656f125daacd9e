//===- ProgressBar.h - The tools' progress bar on a terminal ----*- C++ -*-===//
//
// `[#######      ] 812/1024 ranks, 2400 ranks/s, ETA 0.1 s` on stderr,
// redrawn in place at most five times a second, after the first second
// (short runs print nothing but the last line). Tools show it only when
// stderr is a terminal. Header-only, as the rest of tools/common.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TOOLS_COMMON_PROGRESSBAR_H
#define STG_TOOLS_COMMON_PROGRESSBAR_H

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <string>

namespace stg {

class ProgressBar {
public:
  /// `unit` names what is counted, in the plural: "ranks", "plans".
  explicit ProgressBar(std::string unit)
      : unit(std::move(unit)), start(std::chrono::steady_clock::now()) {}

  void update(uint64_t done, uint64_t total) {
    double seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    if (done < total && (seconds < 1.0 || seconds - shown < 0.2))
      return;
    shown = seconds;
    unsigned width = 30;
    unsigned filled = total ? unsigned(width * done / total) : width;
    double rate = seconds > 0 ? done / seconds : 0;
    double eta = rate > 0 ? (total - done) / rate : 0;
    llvm::errs() << "\r[" << std::string(filled, '#')
                 << std::string(width - filled, ' ') << "] " << done << "/"
                 << total << " " << unit << ", "
                 << llvm::format("%.0f %s/s, ETA %.1f s ", rate,
                                 unit.c_str(), eta);
    if (done == total)
      llvm::errs() << "\n";
  }

private:
  std::string unit;
  std::chrono::steady_clock::time_point start;
  double shown = -1;
};

} // namespace stg

#endif // STG_TOOLS_COMMON_PROGRESSBAR_H
