// C++ definition of twice() for twice_undefined.stan.
#include <stan/model/model_header.hpp>
namespace twice_undefined_model_namespace {
template <typename T0__, stan::require_all_t<stan::is_stan_scalar<T0__>>* = nullptr>
stan::promote_args_t<T0__> twice(const T0__& x, std::ostream* pstream__) { return 2 * x; }
}
