#include "stg/Chakra/ChakraTrace.h"
#include "stg/IR/Graph.h"
#include "stg/Instantiate/Program.h"
