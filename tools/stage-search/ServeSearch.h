//===- ServeSearch.h - `stage-search --serve` -------------------*- C++ -*-===//
//
// The serving deployments of a model on a GPU budget: the flags, their
// checks, and the files (lib/Serve/DeploymentSearch.h does the work).
//
//===----------------------------------------------------------------------===//

#ifndef STG_TOOLS_STAGESEARCH_SERVESEARCH_H
#define STG_TOOLS_STAGESEARCH_SERVESEARCH_H

namespace stg {

/// Whether the command line asks for a serving search (`--serve`).
bool isServeSearch(int argc, char **argv);

/// Runs `stage-search --serve ...`; the exit status.
int runServeSearch(int argc, char **argv);

} // namespace stg

#endif // STG_TOOLS_STAGESEARCH_SERVESEARCH_H
