//===- FuzzSupport.h - What every libFuzzer target shares -------*- C++ -*-===//
//
// CLN (GiNaC's number library) leaks 26 bytes in a static initializer,
// before main; any program linked with it reports that under
// LeakSanitizer. Each target includes this once.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TEST_FUZZ_FUZZSUPPORT_H
#define STG_TEST_FUZZ_FUZZSUPPORT_H

#include "llvm/ADT/StringRef.h"

#include <cstddef>
#include <cstdint>

extern "C" const char *__lsan_default_suppressions() {
  return "leak:libcln.so\n";
}

namespace stg::fuzz {

inline llvm::StringRef asText(const uint8_t *data, size_t size) {
  return llvm::StringRef(reinterpret_cast<const char *>(data), size);
}

} // namespace stg::fuzz

#endif // STG_TEST_FUZZ_FUZZSUPPORT_H
