//===- RoundTripFixture.cpp - Write a fixed Chakra trace for the decoder --===//
//
// chakra-roundtrip-fixture OUT...: writes the same small trace to every OUT
// path (gzipped when it ends in .gz) through ChakraTraceWriter. The ctest
// `chakra-python-roundtrip` decodes the files with test/chakra/decode_et.py,
// a Python reader built from the reference schema, and compares the result
// with roundtrip.expected.json; so the values here and there must agree.
//
//===----------------------------------------------------------------------===//

#include "stg/Chakra/ChakraTrace.h"

#include "llvm/Support/raw_ostream.h"

using namespace stg;
using namespace stg::chakra;

static std::vector<Node> fixtureNodes() {
  std::vector<Node> nodes;
  // Values past 32 bits, to catch a reader that narrows them.
  Node matmul = makeCompNode(0, "layer.0.mlp.up.fwd.mb0", int64_t(3) << 40,
                             (uint64_t(1) << 63) + 5, "einsum");
  matmul.set_duration_micros(250);
  *matmul.add_attr() = inputsAttr({{"x", 1 << 20}, {"w_up", 1 << 24}});
  *matmul.add_attr() = outputsAttr({{"h", 1 << 22}});
  nodes.push_back(matmul);

  Node allReduce = makeCollectiveNode(1, "layer.0.mlp.down.allreduce",
                                      ChakraProtoMsg::ALL_REDUCE, 8 << 20, "1");
  allReduce.add_data_deps(0);
  *allReduce.add_attr() = commPriorityAttr(0);
  *allReduce.add_attr() = involvedDimAttr({true, false});
  nodes.push_back(allReduce);

  Node allGather = makeCollectiveNode(
      2, "embed.allgather", ChakraProtoMsg::ALL_GATHER, int64_t(6) << 30, "2");
  allGather.add_ctrl_deps(1);
  nodes.push_back(allGather);

  Node reduceScatter = makeCollectiveNode(
      3, "grad.reducescatter", ChakraProtoMsg::REDUCE_SCATTER, 4096, "2");
  reduceScatter.add_data_deps(2);
  reduceScatter.add_ctrl_deps(1);
  nodes.push_back(reduceScatter);

  Node allToAll = makeCollectiveNode(4, "moe.dispatch",
                                     ChakraProtoMsg::ALL_TO_ALL, 12288, "3");
  allToAll.add_data_deps(3);
  nodes.push_back(allToAll);

  Node send = makeSendNode(5, "pp.send.mb0", 0, 4, 1001, 65536);
  send.add_data_deps(4);
  nodes.push_back(send);

  Node recv = makeRecvNode(6, "pp.recv.mb1", 4, 0, 2001, 65536);
  recv.add_ctrl_deps(5);
  nodes.push_back(recv);

  Node gelu =
      makeCompNode(7, "layer.0.mlp.gelu.fwd.mb0", 5000, 40000, "elementwise");
  gelu.add_data_deps(0);
  gelu.add_data_deps(6);
  nodes.push_back(gelu);
  return nodes;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    llvm::errs() << "usage: chakra-roundtrip-fixture OUT...\n";
    return 2;
  }
  ChakraTraceWriterOptions options;
  // Fixed, so that the expected output does not change with stagec's
  // version.
  options.generatorVersion = "fixture";
  for (int i = 1; i < argc; ++i) {
    auto writer = ChakraTraceWriter::create(argv[i], options);
    if (!writer) {
      llvm::errs() << llvm::toString(writer.takeError()) << "\n";
      return 1;
    }
    for (const Node &node : fixtureNodes())
      if (llvm::Error err = (*writer)->writeNode(node)) {
        llvm::errs() << llvm::toString(std::move(err)) << "\n";
        return 1;
      }
    if (llvm::Error err = (*writer)->close()) {
      llvm::errs() << llvm::toString(std::move(err)) << "\n";
      return 1;
    }
  }
  return 0;
}
