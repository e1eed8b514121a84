// A user header that fails the C++ compile at once (tests CompilerError).
#include "bread_stan_this_header_does_not_exist.hpp"
