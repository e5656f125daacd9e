#===- STGDependencies.cmake - Find the Debian-packaged dependencies -------===#
#
# LLVM 14 (ADT/Support, lit, FileCheck), the ANTLR4 tool and C++ runtime,
# GiNaC (through pkg-config), protobuf and zlib, CLI11 and GoogleTest.
#
#===----------------------------------------------------------------------===#

find_package(LLVM 14 REQUIRED CONFIG
  HINTS /usr/lib/llvm-14/lib/cmake/llvm)
message(STATUS "LLVM ${LLVM_PACKAGE_VERSION} from ${LLVM_DIR}")

# LLVM's headers and the static Support library; our code keeps RTTI and
# exceptions (ANTLR and GiNaC need both) and never subclasses LLVM's
# polymorphic classes, so mixing is safe.
add_library(stg_llvm INTERFACE)
target_include_directories(stg_llvm SYSTEM INTERFACE ${LLVM_INCLUDE_DIRS})
target_compile_definitions(stg_llvm INTERFACE ${LLVM_DEFINITIONS})
llvm_map_components_to_libnames(STG_LLVM_LIBS support)
target_link_libraries(stg_llvm INTERFACE ${STG_LLVM_LIBS})

find_package(PkgConfig REQUIRED)
pkg_check_modules(GINAC REQUIRED IMPORTED_TARGET ginac)

find_package(antlr4-runtime REQUIRED CONFIG)
find_program(ANTLR4_TOOL antlr4 REQUIRED)
add_library(stg_antlr4 INTERFACE)
target_include_directories(stg_antlr4 SYSTEM INTERFACE ${ANTLR4_INCLUDE_DIR})
target_link_libraries(stg_antlr4 INTERFACE antlr4_shared)

# Chakra traces: libprotobuf, protoc (CMake's FindProtobuf module; Debian
# ships no protobuf CMake package) and zlib for reading gzipped traces.
find_package(Protobuf REQUIRED)
if(NOT TARGET protobuf::protoc)
  message(FATAL_ERROR "protoc not found (Debian package protobuf-compiler)")
endif()
find_package(ZLIB REQUIRED)

# Device files and perturbation specs (YAML).
find_package(yaml-cpp REQUIRED CONFIG)

find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)

find_program(LIT_PY lit.py HINTS /usr/lib/llvm-14/build/utils/lit REQUIRED)
find_program(FILECHECK FileCheck HINTS ${LLVM_TOOLS_BINARY_DIR} REQUIRED)
find_program(LLVM_NOT not HINTS ${LLVM_TOOLS_BINARY_DIR} REQUIRED)
find_program(LLVM_COUNT count HINTS ${LLVM_TOOLS_BINARY_DIR} REQUIRED)
