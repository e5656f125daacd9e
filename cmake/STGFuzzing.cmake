#===- STGFuzzing.cmake - The libFuzzer build configuration ----------------===#
#
# Included by the top-level CMakeLists.txt when STG_ENABLE_FUZZER is on, before
# the libraries are added. The fuzzing build lives in a build directory of its
# own (test/fuzz/run-fuzzer.sh configures build-fuzz/ with clang-14).
#
#===----------------------------------------------------------------------===#

if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "STG_ENABLE_FUZZER needs clang (CC=clang-14 CXX=clang++-14)")
endif()

# Every library is instrumented for coverage and the sanitizers, so libFuzzer
# sees into lib/Parse and lib/IR; the fuzz targets add -fsanitize=fuzzer.
# Undefined behaviour aborts the run instead of printing and going on.
set(STG_FUZZ_SANITIZERS address,undefined)
add_compile_options(-fsanitize=fuzzer-no-link,${STG_FUZZ_SANITIZERS}
                    -fno-sanitize-recover=all -fno-omit-frame-pointer)
add_link_options(-fsanitize=${STG_FUZZ_SANITIZERS})

# Debian's ANTLR 4.9 runtime headers do not compile with clang: Vocabulary
# has `std::vector<std::string> const` members without initializers, so its
# defaulted default constructor is deleted and InterpreterData() {} is an
# error (GCC accepts it). Use a copy of the headers whose three members get a
# `{}` initializer; layout and ABI are unchanged.
set(_stg_vocab_decl "std::vector<std::string> const _literalNames;")
file(READ "${ANTLR4_INCLUDE_DIR}/Vocabulary.h" _stg_vocab)
string(FIND "${_stg_vocab}" "${_stg_vocab_decl}" _stg_vocab_pos)
if(NOT _stg_vocab_pos EQUAL -1)
  set(_stg_antlr_copy "${CMAKE_BINARY_DIR}/antlr4-runtime-clang")
  file(COPY "${ANTLR4_INCLUDE_DIR}/" DESTINATION "${_stg_antlr_copy}")
  foreach(_stg_member _literalNames _symbolicNames _displayNames)
    string(REPLACE "std::vector<std::string> const ${_stg_member};"
                   "std::vector<std::string> const ${_stg_member}{};"
                   _stg_vocab "${_stg_vocab}")
  endforeach()
  file(WRITE "${_stg_antlr_copy}/Vocabulary.h" "${_stg_vocab}")
  target_include_directories(stg_antlr4 SYSTEM BEFORE INTERFACE
                             "$<BUILD_INTERFACE:${_stg_antlr_copy}>")
  message(STATUS "Fuzzing: ANTLR headers patched for clang in ${_stg_antlr_copy}")
endif()

# clang 14 with libstdc++ 12 in C++20 mode rejects llvm::json::Array (a
# std::vector of the then incomplete json::Value, whose members C++20 makes
# constexpr). The libraries that use LLVM's JSON compile as C++17 in the
# fuzzing build only; they need nothing newer. Called once the libraries
# exist.
function(stg_fuzzing_compile_json_users_as_cxx17)
  foreach(target STGPerturb STGTrace STGEmit STGServe)
    set_target_properties(${target} PROPERTIES CXX_STANDARD 17)
  endforeach()
endfunction()
