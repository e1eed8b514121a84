// The model-independent half of every bread_stan model library.
//
// It implements BridgeStan 2.9's published C ABI (the bs_* functions and the
// version integers), so that the PyPI `bridgestan.StanModel` can load our
// libraries, plus batched extensions of our own (prefix bread_): many points in
// one call, spread over threads, with per-point error capture.
//
// The model-specific half is the stanc-generated translation unit, which
// defines `new_model`; the two objects are linked into one shared library that
// exports only the C symbols declared in bridge.hpp.

#include "bridge.hpp"

#include <stan/io/chained_var_context.hpp>
#include <stan/io/empty_var_context.hpp>
#include <stan/io/random_var_context.hpp>
#include <stan/io/json/json_data.hpp>
#include <stan/math/rev/core.hpp>
#include <stan/math/rev/core/init_chainablestack.hpp>
#include <stan/math/rev/functor/finite_diff_hessian_auto.hpp>
#include <stan/math/rev/functor/finite_diff_hessian_times_vector_auto.hpp>
#include <stan/math/rev/functor/gradient.hpp>
#include <stan/math/version.hpp>
#include <stan/model/model_base.hpp>
#include <stan/services/util/create_rng.hpp>
#include <stan/version.hpp>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

// Defined by the stanc-generated model translation unit.
stan::model::model_base& new_model(stan::io::var_context& data_context,
                                   unsigned int seed, std::ostream* msg_stream);

extern "C" {
const int bs_major_version = 2;
const int bs_minor_version = 9;
const int bs_patch_version = 0;
}

struct bs_model {
  stan::model::model_base* model;
  std::string name;
  std::string info;
  std::string names[2][2];  // [include_tp][include_gq]
  int num[2][2];
  std::string unc_names;
  int unc_num;
};

struct bs_rng {
  stan::rng_t rng;
  explicit bs_rng(unsigned int seed) : rng(stan::services::util::create_rng(seed, 0)) {}
};

namespace {

const double NEG_INF = -std::numeric_limits<double>::infinity();
const double NOT_A_NUMBER = std::numeric_limits<double>::quiet_NaN();

STREAM_CALLBACK print_callback = nullptr;

char* copy_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

void set_error(char** error_msg, const std::string& message) {
  if (error_msg) *error_msg = copy_string(message);
}

// Where print statements of single-point calls go: the callback if one is
// set, else standard output.  Batched calls drop prints (null stream), which
// also keeps them free of any per-point stream cost.
struct Printer {
  std::unique_ptr<std::ostringstream> buffer;
  std::ostream* stream() {
    if (!print_callback) return &std::cout;
    if (!buffer) buffer = std::make_unique<std::ostringstream>();
    return buffer.get();
  }
  ~Printer() {
    if (print_callback && buffer) {
      std::string s = buffer->str();
      if (!s.empty()) print_callback(s.c_str(), static_cast<int>(s.size()));
    }
  }
};

// Every thread that runs reverse-mode autodiff needs its own tape.  TBB worker
// threads get one from Stan Math's scheduler observer; any other thread (for
// example a Python thread other than the one that loaded the library) gets one
// here, owned by a thread-local object.
void ensure_ad_stack() {
  if (!stan::math::ChainableStack::instance_) {
    static thread_local std::unique_ptr<stan::math::ChainableStack> own;
    own = std::make_unique<stan::math::ChainableStack>();
  }
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += ',';
    out += parts[i];
  }
  return out;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size()
         && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::unique_ptr<stan::io::var_context> make_context(const char* data) {
  std::string text = data ? data : "";
  if (text.empty()) return std::make_unique<stan::io::empty_var_context>();
  if (ends_with(text, ".json")) {
    std::ifstream in(text);
    if (!in) throw std::invalid_argument("could not open data file " + text);
    return std::make_unique<stan::json::json_data>(in);
  }
  std::istringstream in(text);
  return std::make_unique<stan::json::json_data>(in);
}

// Log density with plain doubles; propto needs autodiff types, because with
// doubles every term counts as constant and would be dropped.
double log_density_impl(const stan::model::model_base& model, bool propto,
                        bool jacobian, const double* theta, std::ostream* out) {
  auto& m = const_cast<stan::model::model_base&>(model);
  int d = m.num_params_r();
  if (propto) {
    ensure_ad_stack();
    stan::math::nested_rev_autodiff nested;
    Eigen::Matrix<stan::math::var, -1, 1> x(d);
    for (int i = 0; i < d; ++i) x(i) = theta[i];
    stan::math::var lp = jacobian ? m.log_prob_propto_jacobian(x, out)
                                  : m.log_prob_propto(x, out);
    return lp.val();
  }
  Eigen::VectorXd x = Eigen::Map<const Eigen::VectorXd>(theta, d);
  return jacobian ? m.log_prob_jacobian(x, out) : m.log_prob(x, out);
}

struct LogProbFunctor {
  stan::model::model_base& m;
  bool propto, jacobian;
  std::ostream* out;
  stan::math::var operator()(const Eigen::Matrix<stan::math::var, -1, 1>& x) const {
    auto& y = const_cast<Eigen::Matrix<stan::math::var, -1, 1>&>(x);
    if (propto) return jacobian ? m.log_prob_propto_jacobian(y, out) : m.log_prob_propto(y, out);
    return jacobian ? m.log_prob_jacobian(y, out) : m.log_prob(y, out);
  }
  double operator()(const Eigen::VectorXd& x) const {
    return log_density_impl(m, propto, jacobian, x.data(), out);
  }
};

void log_density_gradient_impl(const stan::model::model_base& model, bool propto,
                               bool jacobian, const double* theta, double* lp,
                               double* grad, std::ostream* out) {
  ensure_ad_stack();
  auto& m = const_cast<stan::model::model_base&>(model);
  int d = m.num_params_r();
  Eigen::VectorXd x = Eigen::Map<const Eigen::VectorXd>(theta, d);
  Eigen::VectorXd g(d);
  double f;
  stan::math::gradient(LogProbFunctor{m, propto, jacobian, out}, x, f, g);
  *lp = f;
  std::copy(g.data(), g.data() + d, grad);
}

// Value reported for a point whose evaluation threw: -inf for errors that Stan's
// samplers treat as a rejection (domain errors, including reject()), NaN else.
double failure_value(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::domain_error&) {
    return NEG_INF;
  } catch (...) {
    return NOT_A_NUMBER;
  }
}

std::string exception_message(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "unknown C++ exception";
  }
}

// Collects per-point failures of a batched call.
class Failures {
 public:
  void add(int index, const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex_);
    items_.emplace_back(index, message);
  }
  int count() const { return static_cast<int>(items_.size()); }
  // One line per failed point, "index<TAB>message" with newlines escaped,
  // sorted by index so that the text does not depend on the thread count.
  std::string text() {
    std::sort(items_.begin(), items_.end());
    std::string out;
    for (auto& item : items_) {
      std::string msg = item.second;
      std::replace(msg.begin(), msg.end(), '\n', ' ');
      out += std::to_string(item.first) + "\t" + msg + "\n";
    }
    return out;
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<int, std::string>> items_;
};

int resolve_threads(int threads, int n) {
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) threads = 1;
  return std::max(1, std::min(threads, n));
}

tbb::task_arena& arena_for(int threads) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<tbb::task_arena>> arenas;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = arenas[threads];
  if (!slot) slot = std::make_unique<tbb::task_arena>(threads);
  return *slot;
}

// Runs body(i) for i in [0, n) on `threads` threads.  Each point is computed
// independently and identically, so results do not depend on the partition.
template <typename Body>
void parallel_points(int n, int threads, const Body& body) {
  threads = resolve_threads(threads, n);
  if (threads == 1) {
    for (int i = 0; i < n; ++i) body(i);
    return;
  }
  // One contiguous block of points per thread (static partition): the points
  // cost the same, so work stealing would only add scheduling overhead.
  arena_for(threads).execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<int>(0, n, std::max(1, n / threads)),
        [&](const tbb::blocked_range<int>& r) {
          for (int i = r.begin(); i < r.end(); ++i) body(i);
        },
        tbb::static_partitioner());
  });
}

int finish_batch(Failures& failures, char** error_msg) {
  if (failures.count() == 0) return 0;
  set_error(error_msg, failures.text());
  return failures.count();
}

}  // namespace

#define BREAD_TRY try {
#define BREAD_CATCH(error_msg)                         \
  }                                                    \
  catch (const std::exception& e) {                    \
    set_error(error_msg, e.what());                    \
    return -1;                                         \
  }                                                    \
  catch (...) {                                        \
    set_error(error_msg, "unknown C++ exception");     \
    return -1;                                         \
  }

extern "C" {

// ---------------------------------------------------------------------------
// BridgeStan 2.9 ABI
// ---------------------------------------------------------------------------

bs_model* bs_model_construct(const char* data, unsigned int seed, char** error_msg) {
  try {
    ensure_ad_stack();
    auto context = make_context(data);
    Printer printer;
    auto model = std::make_unique<bs_model>();
    model->model = &new_model(*context, seed, printer.stream());
    auto& m = *model->model;
    model->name = m.model_name();
    for (int tp = 0; tp < 2; ++tp) {
      for (int gq = 0; gq < 2; ++gq) {
        std::vector<std::string> names;
        m.constrained_param_names(names, tp, gq);
        model->names[tp][gq] = join(names);
        model->num[tp][gq] = static_cast<int>(names.size());
      }
    }
    std::vector<std::string> unc;
    m.unconstrained_param_names(unc, false, false);
    model->unc_names = join(unc);
    model->unc_num = static_cast<int>(m.num_params_r());
    std::ostringstream info;
    info << "BridgeStan version: 2.9.0 (ABI implemented by bread_stan)\n"
         << "Stan version: " << stan::MAJOR_VERSION << "." << stan::MINOR_VERSION
         << "." << stan::PATCH_VERSION << "\n"
         << "Stan C++ Math version: " << stan::math::MAJOR_VERSION << "."
         << stan::math::MINOR_VERSION << "." << stan::math::PATCH_VERSION << "\n"
         << "Stan C++ Math threading: STAN_THREADS=true\n"
         << "Model compile info:\n";
    for (auto& line : m.model_compile_info()) info << "  " << line << "\n";
    model->info = info.str();
    return model.release();
  } catch (const std::exception& e) {
    set_error(error_msg, e.what());
  } catch (...) {
    set_error(error_msg, "unknown C++ exception in model construction");
  }
  return nullptr;
}

void bs_model_destruct(bs_model* m) {
  if (!m) return;
  delete m->model;
  delete m;
}

void bs_free_error_msg(char* error_msg) { std::free(error_msg); }

const char* bs_name(const bs_model* m) { return m->name.c_str(); }

const char* bs_model_info(const bs_model* m) { return m->info.c_str(); }

const char* bs_param_names(const bs_model* m, bool include_tp, bool include_gq) {
  return m->names[include_tp][include_gq].c_str();
}

const char* bs_param_unc_names(const bs_model* m) { return m->unc_names.c_str(); }

int bs_param_num(const bs_model* m, bool include_tp, bool include_gq) {
  return m->num[include_tp][include_gq];
}

int bs_param_unc_num(const bs_model* m) { return m->unc_num; }

int bs_param_constrain(const bs_model* m, bool include_tp, bool include_gq,
                       const double* theta_unc, double* theta, bs_rng* rng,
                       char** error_msg) {
  BREAD_TRY
  if (include_gq && !rng)
    throw std::invalid_argument("an RNG is needed to include generated quantities");
  Printer printer;
  Eigen::VectorXd x = Eigen::Map<const Eigen::VectorXd>(theta_unc, m->unc_num);
  Eigen::VectorXd out;
  // Without generated quantities the RNG is never used.
  stan::rng_t spare = stan::services::util::create_rng(0, 0);
  m->model->write_array(rng ? rng->rng : spare, x, out, include_tp, include_gq,
                        printer.stream());
  std::copy(out.data(), out.data() + out.size(), theta);
  return 0;
  BREAD_CATCH(error_msg)
}

int bs_param_unconstrain(const bs_model* m, const double* theta, double* theta_unc,
                         char** error_msg) {
  BREAD_TRY
  Printer printer;
  Eigen::VectorXd x = Eigen::Map<const Eigen::VectorXd>(theta, m->num[0][0]);
  Eigen::VectorXd out;
  m->model->unconstrain_array(x, out, printer.stream());
  std::copy(out.data(), out.data() + out.size(), theta_unc);
  return 0;
  BREAD_CATCH(error_msg)
}

int bs_param_unconstrain_json(const bs_model* m, const char* json, double* theta_unc,
                              char** error_msg) {
  BREAD_TRY
  Printer printer;
  std::istringstream in(json ? json : "");
  stan::json::json_data context(in);
  Eigen::VectorXd out;
  m->model->transform_inits(context, out, printer.stream());
  std::copy(out.data(), out.data() + out.size(), theta_unc);
  return 0;
  BREAD_CATCH(error_msg)
}

int bs_param_initialize(const bs_model* m, const char* json, bs_rng* rng,
                        double init_radius, int max_tries, bool jacobian,
                        double* theta_unc, char** error_msg) {
  BREAD_TRY
  if (!rng) throw std::invalid_argument("an RNG is needed for initialization");
  const int d = m->unc_num;
  // Parameters named in the JSON keep their values; the others are drawn
  // uniformly on [-init_radius, init_radius] in the unconstrained space.
  auto given = make_context(json && std::strlen(json) > 0 ? json : "");
  std::string last_error = "log density not finite";
  for (int attempt = 0; attempt < std::max(1, max_tries); ++attempt) {
    Printer printer;
    stan::io::random_var_context random(*m->model, rng->rng, init_radius,
                                        init_radius == 0);
    stan::io::chained_var_context chained(*given, random);
    Eigen::VectorXd x;
    m->model->transform_inits(chained, x, printer.stream());
    try {
      double lp = log_density_impl(*m->model, false, jacobian, x.data(), printer.stream());
      if (std::isfinite(lp)) {
        std::copy(x.data(), x.data() + d, theta_unc);
        return 0;
      }
    } catch (const std::domain_error& e) {
      last_error = e.what();
    }
  }
  throw std::domain_error("no initial point with a finite log density after "
                          + std::to_string(max_tries) + " tries: " + last_error);
  BREAD_CATCH(error_msg)
}

int bs_log_density(const bs_model* m, bool propto, bool jacobian,
                   const double* theta_unc, double* lp, char** error_msg) {
  BREAD_TRY
  Printer printer;
  *lp = log_density_impl(*m->model, propto, jacobian, theta_unc, printer.stream());
  return 0;
  BREAD_CATCH(error_msg)
}

int bs_log_density_gradient(const bs_model* m, bool propto, bool jacobian,
                            const double* theta_unc, double* lp, double* grad,
                            char** error_msg) {
  BREAD_TRY
  Printer printer;
  log_density_gradient_impl(*m->model, propto, jacobian, theta_unc, lp, grad,
                            printer.stream());
  return 0;
  BREAD_CATCH(error_msg)
}

int bs_log_density_hessian(const bs_model* m, bool propto, bool jacobian,
                           const double* theta_unc, double* lp, double* grad,
                           double* hessian, char** error_msg) {
  BREAD_TRY
  ensure_ad_stack();
  Printer printer;
  int d = m->unc_num;
  Eigen::VectorXd x = Eigen::Map<const Eigen::VectorXd>(theta_unc, d);
  Eigen::VectorXd g;
  Eigen::MatrixXd h;
  double f;
  stan::math::internal::finite_diff_hessian_auto(
      LogProbFunctor{*m->model, propto, jacobian, printer.stream()}, x, f, g, h);
  *lp = f;
  std::copy(g.data(), g.data() + d, grad);
  std::copy(h.data(), h.data() + d * d, hessian);
  return 0;
  BREAD_CATCH(error_msg)
}

int bs_log_density_hessian_vector_product(const bs_model* m, bool propto, bool jacobian,
                                          const double* theta_unc, const double* vector,
                                          double* lp, double* hvp, char** error_msg) {
  BREAD_TRY
  ensure_ad_stack();
  Printer printer;
  int d = m->unc_num;
  Eigen::VectorXd x = Eigen::Map<const Eigen::VectorXd>(theta_unc, d);
  Eigen::VectorXd v = Eigen::Map<const Eigen::VectorXd>(vector, d);
  Eigen::VectorXd out;
  double f;
  stan::math::internal::finite_diff_hessian_times_vector_auto(
      LogProbFunctor{*m->model, propto, jacobian, printer.stream()}, x, v, f, out);
  *lp = f;
  std::copy(out.data(), out.data() + d, hvp);
  return 0;
  BREAD_CATCH(error_msg)
}

bs_rng* bs_rng_construct(unsigned int seed, char** error_msg) {
  try {
    return new bs_rng(seed);
  } catch (const std::exception& e) {
    set_error(error_msg, e.what());
  }
  return nullptr;
}

void bs_rng_destruct(bs_rng* rng) { delete rng; }

int bs_set_print_callback(STREAM_CALLBACK callback, char** error_msg) {
  print_callback = callback;
  return 0;
}

// ---------------------------------------------------------------------------
// bread_stan extensions
// ---------------------------------------------------------------------------

int bread_abi_version() { return BREAD_ABI_VERSION; }

int bread_log_density_batch(const bs_model* m, bool propto, bool jacobian, int n,
                            const double* theta_unc, double* lp, int threads,
                            char** error_msg) {
  BREAD_TRY
  const int d = m->unc_num;
  Failures failures;
  parallel_points(n, threads, [&](int i) {
    try {
      lp[i] = log_density_impl(*m->model, propto, jacobian, theta_unc + i * d, nullptr);
    } catch (...) {
      auto e = std::current_exception();
      lp[i] = failure_value(e);
      failures.add(i, exception_message(e));
    }
  });
  return finish_batch(failures, error_msg);
  BREAD_CATCH(error_msg)
}

int bread_log_density_gradient_batch(const bs_model* m, bool propto, bool jacobian,
                                     int n, const double* theta_unc, double* lp,
                                     double* grad, int threads, char** error_msg) {
  BREAD_TRY
  const int d = m->unc_num;
  Failures failures;
  parallel_points(n, threads, [&](int i) {
    try {
      log_density_gradient_impl(*m->model, propto, jacobian, theta_unc + i * d,
                                lp + i, grad + i * d, nullptr);
    } catch (...) {
      auto e = std::current_exception();
      lp[i] = failure_value(e);
      std::fill(grad + i * d, grad + (i + 1) * d, NOT_A_NUMBER);
      failures.add(i, exception_message(e));
    }
  });
  return finish_batch(failures, error_msg);
  BREAD_CATCH(error_msg)
}

int bread_split_batch(const bs_model* prior, const bs_model* full, bool jacobian, int n,
                      const double* theta_unc, double* log_prior, double* log_lik,
                      double* grad_prior, double* grad_lik, int threads,
                      char** error_msg) {
  BREAD_TRY
  const int d = prior->unc_num;
  if (full->unc_num != d)
    throw std::invalid_argument("prior and full models have different dimensions");
  const bool gradient = grad_prior && grad_lik;
  Failures failures;
  parallel_points(n, threads, [&](int i) {
    const double* x = theta_unc + i * d;
    double lp_prior = NOT_A_NUMBER;
    try {
      if (gradient) {
        log_density_gradient_impl(*prior->model, false, jacobian, x, &lp_prior,
                                  grad_prior + i * d, nullptr);
      } else {
        lp_prior = log_density_impl(*prior->model, false, jacobian, x, nullptr);
      }
    } catch (...) {
      auto e = std::current_exception();
      log_prior[i] = failure_value(e);
      log_lik[i] = NOT_A_NUMBER;
      if (gradient) {
        std::fill(grad_prior + i * d, grad_prior + (i + 1) * d, NOT_A_NUMBER);
        std::fill(grad_lik + i * d, grad_lik + (i + 1) * d, NOT_A_NUMBER);
      }
      failures.add(i, "prior: " + exception_message(e));
      return;
    }
    log_prior[i] = lp_prior;
    try {
      double lp_full;
      if (gradient) {
        double* g = grad_lik + i * d;
        log_density_gradient_impl(*full->model, false, jacobian, x, &lp_full, g, nullptr);
        const double* gp = grad_prior + i * d;
        for (int j = 0; j < d; ++j) g[j] -= gp[j];
      } else {
        lp_full = log_density_impl(*full->model, false, jacobian, x, nullptr);
      }
      log_lik[i] = lp_full - lp_prior;
    } catch (...) {
      auto e = std::current_exception();
      log_lik[i] = failure_value(e);
      if (gradient) std::fill(grad_lik + i * d, grad_lik + (i + 1) * d, NOT_A_NUMBER);
      failures.add(i, "likelihood: " + exception_message(e));
    }
  });
  return finish_batch(failures, error_msg);
  BREAD_CATCH(error_msg)
}

int bread_param_unconstrain_batch(const bs_model* m, int n, const double* theta,
                                  double* theta_unc, char** error_msg) {
  BREAD_TRY
  const int dc = m->num[0][0];
  const int d = m->unc_num;
  for (int i = 0; i < n; ++i) {
    Eigen::VectorXd x = Eigen::Map<const Eigen::VectorXd>(theta + i * dc, dc);
    Eigen::VectorXd out;
    try {
      m->model->unconstrain_array(x, out, nullptr);
    } catch (const std::exception& e) {
      throw std::domain_error("point " + std::to_string(i) + ": " + e.what());
    }
    std::copy(out.data(), out.data() + d, theta_unc + i * d);
  }
  return 0;
  BREAD_CATCH(error_msg)
}

int bread_param_constrain_batch(const bs_model* m, bool include_tp, int n,
                                const double* theta_unc, double* theta, int threads,
                                char** error_msg) {
  BREAD_TRY
  const int d = m->unc_num;
  const int dc = m->num[include_tp][0];
  Failures failures;
  parallel_points(n, threads, [&](int i) {
    stan::rng_t rng = stan::services::util::create_rng(0, 0);
    try {
      Eigen::VectorXd x = Eigen::Map<const Eigen::VectorXd>(theta_unc + i * d, d);
      Eigen::VectorXd out;
      m->model->write_array(rng, x, out, include_tp, false, nullptr);
      std::copy(out.data(), out.data() + dc, theta + i * dc);
    } catch (...) {
      std::fill(theta + i * dc, theta + (i + 1) * dc, NOT_A_NUMBER);
      failures.add(i, exception_message(std::current_exception()));
    }
  });
  return finish_batch(failures, error_msg);
  BREAD_CATCH(error_msg)
}

int bread_generate_batch(const bs_model* m, unsigned int seed, long long first, int n,
                         const double* theta_unc, double* out, int threads,
                         char** error_msg) {
  BREAD_TRY
  const int d = m->unc_num;
  const int dc = m->num[1][1];
  Failures failures;
  parallel_points(n, threads, [&](int i) {
    // Draw first + i owns the RNG stream (seed, first + i + 1): it does not
    // depend on the batch or the thread count.  Stream 0 is left to
    // transformed data.
    stan::rng_t rng = stan::services::util::create_rng(
        seed, static_cast<unsigned int>(first + i + 1));
    try {
      Eigen::VectorXd x(d);
      if (d > 0) x = Eigen::Map<const Eigen::VectorXd>(theta_unc + i * d, d);
      Eigen::VectorXd values;
      m->model->write_array(rng, x, values, true, true, nullptr);
      std::copy(values.data(), values.data() + dc, out + i * dc);
    } catch (...) {
      std::fill(out + i * dc, out + (i + 1) * dc, NOT_A_NUMBER);
      failures.add(i, exception_message(std::current_exception()));
    }
  });
  return finish_batch(failures, error_msg);
  BREAD_CATCH(error_msg)
}

int bread_bench_gradient(const bs_model* m, int n, const double* theta_unc, int repeats,
                         double* seconds, char** error_msg) {
  BREAD_TRY
  const int d = m->unc_num;
  std::vector<double> grad(d);
  double lp, total = 0;
  auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < repeats; ++r) {
    for (int i = 0; i < n; ++i) {
      log_density_gradient_impl(*m->model, false, true, theta_unc + i * d, &lp,
                                grad.data(), nullptr);
      total += lp;
    }
  }
  auto stop = std::chrono::steady_clock::now();
  *seconds = std::chrono::duration<double>(stop - start).count();
  if (std::isnan(total)) *seconds = -*seconds;  // keeps the loop from being elided
  return 0;
  BREAD_CATCH(error_msg)
}

}  // extern "C"
