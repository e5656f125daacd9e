#include "stg/Support/Diagnostics.h"
#include "stg/Instantiate/Program.h"
