#include "stg/IR/Expr.h"
#include "stg/Emit/TraceEmitter.h"
