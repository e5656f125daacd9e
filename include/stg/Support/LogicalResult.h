//===- LogicalResult.h - Success or failure of a step -----------*- C++ -*-===//
//
// MLIR's LogicalResult (not in LLVM 14's Support): a step reports failure
// after emitting its diagnostics, so the caller only needs to know whether to
// go on.
//
//===----------------------------------------------------------------------===//

#ifndef STG_SUPPORT_LOGICALRESULT_H
#define STG_SUPPORT_LOGICALRESULT_H

namespace stg {

class [[nodiscard]] LogicalResult {
public:
  static LogicalResult success(bool ok = true) { return LogicalResult(ok); }
  static LogicalResult failure(bool failed = true) {
    return LogicalResult(!failed);
  }
  bool succeeded() const { return ok; }
  bool failed() const { return !ok; }

private:
  explicit LogicalResult(bool ok) : ok(ok) {}
  bool ok;
};

inline LogicalResult success(bool ok = true) {
  return LogicalResult::success(ok);
}
inline LogicalResult failure(bool failed = true) {
  return LogicalResult::failure(failed);
}
inline bool succeeded(LogicalResult result) { return result.succeeded(); }
inline bool failed(LogicalResult result) { return result.failed(); }

} // namespace stg

#endif // STG_SUPPORT_LOGICALRESULT_H
