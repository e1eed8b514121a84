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


// Log prior, log likelihood and their gradients at one point, as
// bread_split_batch computes them.  With prior == nullptr (the plain joint of
// `full`) the joint is reported as the log prior and the likelihood is 0.
// Failures leave -inf (domain errors) or NaN and NaN gradients; *message (if
// given) gets the reason.  Returns whether the point was evaluated.
bool split_point(const bs_model* prior, const bs_model* full, bool jacobian,
                 const double* x, double* log_prior, double* log_lik,
                 double* grad_prior, double* grad_lik, std::string* message) {
  const int d = full->unc_num;
  const bool gradient = grad_prior && grad_lik;
  const bs_model* first = prior ? prior : full;
  double lp_prior = NOT_A_NUMBER;
  try {
    if (gradient) {
      log_density_gradient_impl(*first->model, false, jacobian, x, &lp_prior, grad_prior,
                                nullptr);
    } else {
      lp_prior = log_density_impl(*first->model, false, jacobian, x, nullptr);
    }
  } catch (...) {
    auto e = std::current_exception();
    *log_prior = failure_value(e);
    *log_lik = prior ? NOT_A_NUMBER : 0.0;
    if (gradient) {
      std::fill(grad_prior, grad_prior + d, NOT_A_NUMBER);
      std::fill(grad_lik, grad_lik + d, prior ? NOT_A_NUMBER : 0.0);
    }
    if (message) *message = (prior ? "prior: " : "") + exception_message(e);
    return false;
  }
  *log_prior = lp_prior;
  if (!prior) {
    *log_lik = 0.0;
    if (gradient) std::fill(grad_lik, grad_lik + d, 0.0);
    return true;
  }
  try {
    double lp_full;
    if (gradient) {
      log_density_gradient_impl(*full->model, false, jacobian, x, &lp_full, grad_lik,
                                nullptr);
      for (int j = 0; j < d; ++j) grad_lik[j] -= grad_prior[j];
    } else {
      lp_full = log_density_impl(*full->model, false, jacobian, x, nullptr);
    }
    *log_lik = lp_full - lp_prior;
  } catch (...) {
    auto e = std::current_exception();
    *log_lik = failure_value(e);
    if (gradient) std::fill(grad_lik, grad_lik + d, NOT_A_NUMBER);
    if (message) *message = "likelihood: " + exception_message(e);
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Native HMC and NUTS transitions.
//
// They reproduce bread_stan.kernels.hmc / nuts bit for bit: every floating
// point operation is the one numpy performs, in the same order.  Elementwise
// arithmetic is IEEE-exact in both; sums over coordinates use numpy's pairwise
// summation (what np.add.reduce does along a contiguous last axis); the
// transcendental functions that decide anything are either computed in Python
// and passed in (log-uniforms, momenta) or are np.logaddexp, whose loop calls
// the C library's exp and log1p as we do here.  Only the NUTS acceptance
// statistic uses exp() of our libm where numpy may use its own SIMD exp (it
// decides nothing).  Floating-point contraction (FMA) would break the
// equality, so it is switched off for this code.
// ---------------------------------------------------------------------------

#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")

// numpy's pairwise_sum for float64 (numpy/_core/src/umath/loops_utils.h.src),
// plus the reduction's initial value 0.
double pairwise_sum(const double* a, long n) {
  if (n < 8) {
    double res = 0.;
    for (long i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    long i;
    for (i = 8; i < n - (n % 8); i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  long n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

// np.add.reduce(a * b, axis=-1) for one row.
double row_dot(const double* a, const double* b, int d, double* scratch) {
  for (int j = 0; j < d; ++j) scratch[j] = a[j] * b[j];
  return 0.0 + pairwise_sum(scratch, d);
}

const double LOG_HALF = -0.6931471805599453;  // the double nearest log(1/2)
const double NPY_LOGE2 = 0.693147180559945309417232121458176568;
const double DIVERGENCE_THRESHOLD = 1000.0;

// npy_logaddexp.
double log_add_exp(double x, double y) {
  if (x == y) return x + NPY_LOGE2;  // also handles infinities of the same sign
  const double tmp = x - y;
  if (tmp > 0) return x + std::log1p(std::exp(-tmp));
  if (tmp <= 0) return y + std::log1p(std::exp(tmp));
  return tmp;  // NaN
}

// One chain's Hamiltonian: the tempered density and the metric.
// A Gaussian base q0 = N(m, L L') standing in for the prior instance, as
// bread_stan.ais.gaussian_base.GaussianBase.log_density computes it, bit for bit.
// base: [log normaliser, m (d), then sd (d) when diagonal, or L^-1 and L^-T
// (d x d each, row-major) when dense].  Writes log q0(x) and its gradient.
void gaussian_base_point(const double* base, bool dense, int d, const double* x,
                         double* log_q, double* grad) {
  static thread_local std::vector<double> buffer;
  if (buffer.size() < 3 * static_cast<size_t>(d)) buffer.resize(3 * d);
  double* z = buffer.data();
  double* solved = z + d;  // L^-1 (x - m)
  double* scratch = z + 2 * d;
  const double* mean = base + 1;
  const double* w = base + 1 + d;
  for (int j = 0; j < d; ++j) z[j] = x[j] - mean[j];
  if (!dense) {
    for (int j = 0; j < d; ++j) solved[j] = z[j] / w[j];
    for (int j = 0; j < d; ++j) grad[j] = -(solved[j] / w[j]);
  } else {
    const long dd = static_cast<long>(d) * d;
    for (int i = 0; i < d; ++i) solved[i] = row_dot(w + static_cast<long>(i) * d, z, d, scratch);
    for (int j = 0; j < d; ++j)
      grad[j] = -row_dot(w + dd + static_cast<long>(j) * d, solved, d, scratch);
  }
  *log_q = base[0] - 0.5 * row_dot(solved, solved, d, scratch);
}

// split_point with a Gaussian base as the "prior": log prior = log q0,
// log lik = log p~ - log q0 (p~: full's joint with the Jacobian), as
// bread_stan.ais.gaussian_base.GaussianBaseTarget.evaluate.
void base_split_point(const double* base, bool dense, const bs_model* full, const double* x,
                      double* log_q, double* log_lik, double* grad_q, double* grad_lik) {
  const int d = full->unc_num;
  gaussian_base_point(base, dense, d, x, log_q, grad_q);
  double lp_full;
  try {
    log_density_gradient_impl(*full->model, false, true, x, &lp_full, grad_lik, nullptr);
    for (int j = 0; j < d; ++j) grad_lik[j] -= grad_q[j];
  } catch (...) {
    lp_full = failure_value(std::current_exception());
    std::fill(grad_lik, grad_lik + d, NOT_A_NUMBER);
  }
  *log_lik = lp_full - *log_q;
}

// The first leg of the waypoint path, from the prior to a Gaussian q0: log prior from
// the prior instance, log lik = log q0 - log prior (and gradients), as
// bread_stan.ais.waypoint.PriorToBase.evaluate computes it, bit for bit.
void prior_base_point(const double* base, bool dense, const bs_model* prior, const double* x,
                      double* log_prior, double* log_lik, double* grad_prior,
                      double* grad_lik) {
  const int d = prior->unc_num;
  try {
    log_density_gradient_impl(*prior->model, false, true, x, log_prior, grad_prior, nullptr);
  } catch (...) {
    *log_prior = failure_value(std::current_exception());
    std::fill(grad_prior, grad_prior + d, NOT_A_NUMBER);
  }
  double log_q;
  gaussian_base_point(base, dense, d, x, &log_q, grad_lik);
  for (int j = 0; j < d; ++j) grad_lik[j] -= grad_prior[j];
  *log_lik = log_q - *log_prior;
}

struct Hamiltonian {
  const bs_model* prior;
  const bs_model* full;
  const double* base;  // a Gaussian base: in place of prior, or with it as the far end
  bool base_dense;
  int d;
  double beta;
  bool dense;
  const double* minv;  // d (diagonal) or d x d (dense, row-major)
  // At beta = 0 of the prior path the likelihood moves nothing: the leapfrog steps
  // evaluate the prior instance alone, and finish() evaluates the likelihood once, at
  // the point the transition returns (the same numbers, bit for bit).
  bool prior_alone;
  double* scratch;  // d doubles each, owned by the thread (no allocation per chain)
  double* vel;

  Hamiltonian(const bs_model* prior, const bs_model* full, const double* base,
              bool base_dense, int d, double beta, bool dense, const double* minv)
      : prior(prior), full(full), base(base), base_dense(base_dense), d(d), beta(beta),
        dense(dense), minv(minv), prior_alone(!base && prior && beta == 0.0) {
    static thread_local std::vector<double> buffer;
    if (buffer.size() < 2 * static_cast<size_t>(d)) buffer.resize(2 * d);
    scratch = buffer.data();
    vel = buffer.data() + d;
  }

  double logp(double lp, double ll) const {
    double out = beta == 0.0 ? lp + 0.0 : lp + beta * ll;
    return std::isnan(out) ? NEG_INF : out;
  }
  void grad(const double* gp, const double* gl, double* g) const {
    for (int j = 0; j < d; ++j) g[j] = gp[j] + (beta == 0.0 ? 0.0 : beta * gl[j]);
  }
  // out = M^-1 p
  void velocity(const double* p, double* out) const {
    if (!dense) {
      for (int j = 0; j < d; ++j) out[j] = minv[j] * p[j];
      return;
    }
    for (int i = 0; i < d; ++i) out[i] = row_dot(minv + static_cast<long>(i) * d, p, d, scratch);
  }
  double dot_velocity(const double* p, const double* v) const {
    velocity(p, vel);
    return row_dot(vel, v, d, scratch);
  }
  double kinetic(const double* p) const { return 0.5 * dot_velocity(p, p); }
  // The kinetic energy, leaving M^-1 p in v (the same numbers as kinetic(p)): NUTS keeps
  // the velocities of its trees' end momenta, so that the no-U-turn checks cost O(d)
  // each, not a dense metric's O(d^2).
  double kinetic_into(const double* p, double* v) const {
    velocity(p, v);
    return 0.5 * row_dot(v, p, d, scratch);
  }
  double dot(const double* a, const double* b) const { return row_dot(a, b, d, scratch); }

  // One leapfrog step of signed size e from (q, p, g); evaluates the new point.
  void leapfrog(double* q, double* p, double* g, double e, double* lp, double* ll,
                double* gp, double* gl) const {
    const double half = 0.5 * e;
    for (int j = 0; j < d; ++j) p[j] = p[j] + half * g[j];
    velocity(p, vel);
    for (int j = 0; j < d; ++j) q[j] = q[j] + e * vel[j];
    if (prior_alone)
      split_point(nullptr, prior, true, q, lp, ll, gp, gl, nullptr);  // ll, gl: 0, unused
    else if (base && prior)
      prior_base_point(base, base_dense, prior, q, lp, ll, gp, gl);
    else if (base)
      base_split_point(base, base_dense, full, q, lp, ll, gp, gl);
    else
      split_point(prior, full, true, q, lp, ll, gp, gl, nullptr);
    grad(gp, gl, g);
    for (int j = 0; j < d; ++j) p[j] = p[j] + half * g[j];
  }
};

struct ChainIn {  // a chain's current state
  const double *q, *gp, *gl;
  double lp, ll;
};

struct ChainOut {  // where a chain's new state goes
  double *q, *gp, *gl, *lp, *ll;
};

// The likelihood of a transition's new point, where the leapfrog steps left it out
// (Hamiltonian::prior_alone); a point the chain did not leave keeps its own.
void finish(const Hamiltonian& H, const ChainIn& in, const ChainOut& out) {
  if (!H.prior_alone || std::equal(out.q, out.q + H.d, in.q)) return;
  split_point(H.prior, H.full, true, out.q, out.lp, out.ll, out.gp, out.gl, nullptr);
}

// Static HMC, as bread_stan.kernels.hmc.HMC.step for one chain.
// stats: [h0 - h1 (-inf when rejected outright), h1 - h0 (inf when stopped)];
// flags: [accepted, divergent, n_grad].
void hmc_chain(const Hamiltonian& H, const ChainIn& in, const double* p0, double eps,
               long long n_leapfrog, double log_u, const ChainOut& out, double* stats,
               long long* flags) {
  const int d = H.d;
  std::vector<double> q(in.q, in.q + d), p(p0, p0 + d), g(d), gp(d), gl(d);
  H.grad(in.gp, in.gl, g.data());
  const double h0 = H.kinetic(p0) - H.logp(in.lp, in.ll);
  double lp = in.lp, ll = in.ll;
  std::copy(in.gp, in.gp + d, gp.begin());
  std::copy(in.gl, in.gl + d, gl.begin());
  bool ok = true;
  long long n_grad = 0;
  for (long long k = 0; k < n_leapfrog; ++k) {
    H.leapfrog(q.data(), p.data(), g.data(), eps, &lp, &ll, gp.data(), gl.data());
    ++n_grad;
    bool finite = std::isfinite(H.logp(lp, ll));
    for (int j = 0; j < d && finite; ++j) finite = std::isfinite(g[j]);
    if (!finite) {
      ok = false;
      break;
    }
  }
  const double h1 = H.kinetic(p.data()) - H.logp(lp, ll);
  double delta = ok ? h0 - h1 : NEG_INF;
  if (std::isnan(delta)) delta = NEG_INF;
  const bool accept = log_u < delta;
  const double energy_error = ok ? h1 - h0 : std::numeric_limits<double>::infinity();
  const bool divergent = !ok || !std::isfinite(h1) || energy_error > DIVERGENCE_THRESHOLD;
  if (accept) {
    std::copy(q.begin(), q.end(), out.q);
    std::copy(gp.begin(), gp.end(), out.gp);
    std::copy(gl.begin(), gl.end(), out.gl);
    *out.lp = lp;
    *out.ll = ll;
  } else {
    std::copy(in.q, in.q + d, out.q);
    std::copy(in.gp, in.gp + d, out.gp);
    std::copy(in.gl, in.gl + d, out.gl);
    *out.lp = in.lp;
    *out.ll = in.ll;
  }
  stats[0] = delta;
  stats[1] = energy_error;
  flags[0] = accept;
  flags[1] = divergent;
  flags[2] = n_grad;
}

// A NUTS subtree: momenta at its first and last point built and their velocities
// M^-1 p, summed momentum, its proposal (position, gradients, log prior, log lik,
// H - H0) and log sum of weights.
struct Subtree {
  std::vector<double> beg, end, vbeg, vend, rho, q, gp, gl;
  double lsw = 0, lp = 0, ll = 0, dh = 0;
  explicit Subtree(int d) : beg(d), end(d), vbeg(d), vend(d), rho(d), q(d), gp(d), gl(d) {}
};

// Stan's no-U-turn checks when `left` (built first) is joined by `right`
// (kernels.nuts._merge_ok); v_beg and v_end are the velocities of left's end momenta.
bool merge_ok(const Hamiltonian& H, const std::vector<double>& v_beg,
              const std::vector<double>& l_end, const std::vector<double>& v_end,
              const std::vector<double>& l_rho, const Subtree& r,
              std::vector<double>* spans) {
  const int d = H.d;
  std::vector<double>& whole = spans[0];
  std::vector<double>& left_ext = spans[1];
  std::vector<double>& right_ext = spans[2];
  for (int j = 0; j < d; ++j) {
    whole[j] = l_rho[j] + r.rho[j];
    left_ext[j] = l_rho[j] + r.beg[j];
    right_ext[j] = r.rho[j] + l_end[j];
  }
  return H.dot(v_beg.data(), whole.data()) > 0
         && H.dot(v_beg.data(), left_ext.data()) > 0
         && H.dot(v_end.data(), right_ext.data()) > 0
         && H.dot(r.vend.data(), whole.data()) > 0
         && H.dot(r.vbeg.data(), left_ext.data()) > 0
         && H.dot(r.vend.data(), right_ext.data()) > 0;
}

// Log-uniforms of one chain, handed out in order; running out is reported.
struct Uniforms {
  const double* values;
  int k;
  int used = 0;
  bool exhausted = false;
  double next() {
    if (used >= k) {
      exhausted = true;
      return 0.0;
    }
    return values[used++];
  }
};

// A thread's working memory for NUTS transitions, sized once.
struct NutsWork {
  int d = -1;
  std::vector<Subtree> slots;
  Subtree cur{0};
  std::vector<double> g0, end_q[2], end_p[2], end_v[2], end_g[2], rho, spans[3], cq, cp, cv,
      cg, gp, gl;
  void prepare(int dim, int max_depth) {
    if (dim == d && static_cast<int>(slots.size()) >= max_depth) return;
    d = dim;
    slots.assign(max_depth, Subtree(d));
    cur = Subtree(d);
    for (auto* v : {&g0, &end_q[0], &end_q[1], &end_p[0], &end_p[1], &end_v[0], &end_v[1],
                    &end_g[0], &end_g[1], &rho, &spans[0], &spans[1], &spans[2], &cq, &cp,
                    &cv, &cg, &gp, &gl})
      v->assign(d, 0.0);
  }
};

// NUTS, as bread_stan.kernels.nuts (the iterative tree builder) for one chain.
// stats: [sum of min(1, exp(H0 - H)) over leapfrog steps, H - H0 of the
// sample]; flags: [divergent, n_grad, tree depth, log-uniforms used (-1 when
// the k given ran out: nothing else is then valid)].
void nuts_chain(const Hamiltonian& H, const ChainIn& in, const double* p0, double eps,
                int max_depth, Uniforms u, const ChainOut& out, double* stats,
                long long* flags) {
  const int d = H.d;
  using Vec = std::vector<double>;
  static thread_local NutsWork work;  // no allocation per chain
  work.prepare(d, max_depth);
  Vec& cv = work.cv;  // the velocity of the current leaf's momentum
  const double h0 = H.kinetic_into(p0, cv.data()) - H.logp(in.lp, in.ll);
  Vec& g0 = work.g0;
  H.grad(in.gp, in.gl, g0.data());
  // The sample: the initial point until a proposal is accepted.
  std::copy(in.q, in.q + d, out.q);
  std::copy(in.gp, in.gp + d, out.gp);
  std::copy(in.gl, in.gl + d, out.gl);
  *out.lp = in.lp;
  *out.ll = in.ll;
  double out_dh = 0.0;
  long long n_leap = 0;
  double sum_metro = 0.0;
  bool divergent = false;
  // Both ends of the trajectory (0 backward, 1 forward): position, momentum, gradient.
  Vec* end_q = work.end_q;
  Vec* end_p = work.end_p;
  Vec* end_v = work.end_v;
  Vec* end_g = work.end_g;
  for (int side = 0; side < 2; ++side) {
    end_q[side].assign(in.q, in.q + d);
    end_p[side].assign(p0, p0 + d);
    end_v[side] = cv;
    end_g[side] = g0;
  }
  Vec& rho = work.rho;
  rho.assign(p0, p0 + d);
  double lsw = 0.0;
  int depth = 0;
  long long leaf = 0;
  std::vector<Subtree>& slots = work.slots;
  Subtree& cur = work.cur;
  Vec* spans = work.spans;
  int side = u.next() < LOG_HALF ? 1 : 0;
  Vec& cq = work.cq;
  Vec& cp = work.cp;
  Vec& cg = work.cg;
  cq.assign(in.q, in.q + d);
  cp.assign(p0, p0 + d);
  cg = g0;
  double lp, ll;
  Vec& gp = work.gp;
  Vec& gl = work.gl;
  while (true) {
    H.leapfrog(cq.data(), cp.data(), cg.data(), side == 1 ? eps : -eps, &lp, &ll,
               gp.data(), gl.data());
    double dh = (H.kinetic_into(cp.data(), cv.data()) - H.logp(lp, ll)) - h0;
    if (std::isnan(dh)) dh = std::numeric_limits<double>::infinity();
    ++n_leap;
    sum_metro += std::exp(std::min(-dh, 0.0));
    bool alive = !(dh > DIVERGENCE_THRESHOLD);
    if (!alive) divergent = true;
    // The new leaf as a one-point subtree, then carries up the levels.
    if (alive) {
      cur.beg = cp;
      cur.end = cp;
      cur.vbeg = cv;
      cur.vend = cv;
      cur.rho = cp;
      cur.q = cq;
      cur.gp = gp;
      cur.gl = gl;
      cur.lsw = -dh;
      cur.lp = lp;
      cur.ll = ll;
      cur.dh = dh;
      for (int level = 0; level < max_depth; ++level) {
        if (!((leaf >> level) & 1)) {
          std::swap(slots[level], cur);  // cur is not used again for this leaf
          break;
        }
        Subtree& left = slots[level];
        const bool ok = merge_ok(H, left.vbeg, left.end, left.vend, left.rho, cur, spans);
        const double merged = log_add_exp(left.lsw, cur.lsw);
        const bool take_right = u.next() < cur.lsw - merged;
        if (!take_right) {
          std::swap(cur.q, left.q);
          std::swap(cur.gp, left.gp);
          std::swap(cur.gl, left.gl);
          cur.lp = left.lp;
          cur.ll = left.ll;
          cur.dh = left.dh;
        }
        std::swap(cur.beg, left.beg);
        std::swap(cur.vbeg, left.vbeg);
        for (int j = 0; j < d; ++j) cur.rho[j] = left.rho[j] + cur.rho[j];
        cur.lsw = merged;
        if (!ok) {
          alive = false;
          break;
        }
      }
    }
    const bool complete = alive && leaf == (1LL << depth) - 1;
    ++leaf;
    bool finished = !alive;
    if (complete) {
      // The completed subtree was stored at level `depth` by the carries.
      Subtree& sub = slots[depth];
      // Biased progressive sampling: move to the new subtree with probability
      // min(1, w_new / w_old).
      if (u.next() < sub.lsw - lsw) {
        std::copy(sub.q.begin(), sub.q.end(), out.q);
        std::copy(sub.gp.begin(), sub.gp.end(), out.gp);
        std::copy(sub.gl.begin(), sub.gl.end(), out.gl);
        *out.lp = sub.lp;
        *out.ll = sub.ll;
        out_dh = sub.dh;
      }
      lsw = log_add_exp(lsw, sub.lsw);
      // The old trajectory is the left part: its far end is on the other side.
      const bool ok = merge_ok(H, end_v[1 - side], end_p[side], end_v[side], rho, sub,
                               spans);
      for (int j = 0; j < d; ++j) rho[j] = rho[j] + sub.rho[j];
      end_q[side] = cq;
      end_p[side] = cp;
      end_v[side] = cv;
      end_g[side] = cg;
      ++depth;
      finished = !ok || depth >= max_depth;
      if (!finished) {
        side = u.next() < LOG_HALF ? 1 : 0;
        cq = end_q[side];
        cp = end_p[side];
        cv = end_v[side];
        cg = end_g[side];
        leaf = 0;
      }
    }
    if (u.exhausted) {
      flags[3] = -1;
      return;
    }
    if (finished) break;
  }
  stats[0] = sum_metro;
  stats[1] = out_dh;
  flags[0] = divergent;
  flags[1] = n_leap;
  flags[2] = depth;
  flags[3] = u.used;
}

#pragma GCC pop_options

// Like parallel_points, for work whose cost varies from point to point (a
// NUTS tree): chains are handed out one at a time.
template <typename Body>
void parallel_chains(int n, int threads, const Body& body) {
  threads = resolve_threads(threads, n);
  if (threads == 1) {
    for (int i = 0; i < n; ++i) body(i);
    return;
  }
  arena_for(threads).execute([&] {
    tbb::parallel_for(tbb::blocked_range<int>(0, n, 1),
                      [&](const tbb::blocked_range<int>& r) {
                        for (int i = r.begin(); i < r.end(); ++i) body(i);
                      });
  });
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
    std::string message;
    if (!split_point(prior, full, jacobian, theta_unc + i * d, log_prior + i, log_lik + i,
                     gradient ? grad_prior + i * d : nullptr,
                     gradient ? grad_lik + i * d : nullptr, &message))
      failures.add(i, message);
  });
  return finish_batch(failures, error_msg);
  BREAD_CATCH(error_msg)
}

namespace {

void check_pair(const bs_model* prior, const bs_model* full, const double* base) {
  if (prior && full->unc_num != prior->unc_num)
    throw std::invalid_argument("prior and full models have different dimensions");
  (void)base;  // with prior: the path from the prior to the base (prior_base_point)
}

}  // namespace

int bread_hmc_transition(const bs_model* prior, const bs_model* full,
                         const double* base, bool base_dense, int n,
                         const double* q0, const double* lp0, const double* ll0,
                         const double* gp0, const double* gl0, const double* beta,
                         const double* step_size, const long long* n_leapfrog, bool dense,
                         bool shared,
                         const double* inv_metric, const double* momentum,
                         const double* log_u, double* q, double* lp, double* ll,
                         double* gp, double* gl, double* stats, long long* flags,
                         int threads, char** error_msg) {
  BREAD_TRY
  check_pair(prior, full, base);
  const long d = full->unc_num;
  const long metric_stride = shared ? 0 : dense ? d * d : d;  // shared: one for all
  parallel_chains(n, threads, [&](int i) {
    Hamiltonian H(prior, full, base, base_dense, d, beta[i], dense,
                  inv_metric + i * metric_stride);
    ChainIn in{q0 + i * d, gp0 + i * d, gl0 + i * d, lp0[i], ll0[i]};
    ChainOut out{q + i * d, gp + i * d, gl + i * d, lp + i, ll + i};
    hmc_chain(H, in, momentum + i * d, step_size[i], n_leapfrog[i], log_u[i], out,
              stats + 2 * i, flags + 3 * i);
    finish(H, in, out);
  });
  return 0;
  BREAD_CATCH(error_msg)
}

int bread_nuts_transition(const bs_model* prior, const bs_model* full,
                         const double* base, bool base_dense, int n,
                          const double* q0, const double* lp0, const double* ll0,
                          const double* gp0, const double* gl0, const double* beta,
                          const double* step_size, int max_depth, bool dense,
                          bool shared,
                          const double* inv_metric, const double* momentum,
                          const double* log_u, int k, double* q, double* lp, double* ll,
                          double* gp, double* gl, double* stats, long long* flags,
                          int threads, char** error_msg) {
  BREAD_TRY
  check_pair(prior, full, base);
  if (max_depth < 1 || max_depth > 62)
    throw std::invalid_argument("max_depth must be between 1 and 62");
  const long d = full->unc_num;
  const long metric_stride = shared ? 0 : dense ? d * d : d;  // shared: one for all
  parallel_chains(n, threads, [&](int i) {
    Hamiltonian H(prior, full, base, base_dense, d, beta[i], dense,
                  inv_metric + i * metric_stride);
    ChainIn in{q0 + i * d, gp0 + i * d, gl0 + i * d, lp0[i], ll0[i]};
    ChainOut out{q + i * d, gp + i * d, gl + i * d, lp + i, ll + i};
    nuts_chain(H, in, momentum + i * d, step_size[i], max_depth,
               Uniforms{log_u + static_cast<long>(i) * k, k}, out, stats + 2 * i,
               flags + 4 * i);
    finish(H, in, out);
  });
  return 0;
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
