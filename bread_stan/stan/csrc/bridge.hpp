// The C ABI of a bread_stan model library.
//
// The bs_* declarations follow BridgeStan 2.9's published `bridgestan.h`
// (so the PyPI `bridgestan` package can load our libraries); the bread_*
// functions are batched extensions.  Every function that can fail returns a
// status (0 = success, -1 = the call failed; for batched calls a positive
// value = that many points failed, each left at -inf or NaN) and sets
// *error_msg to a malloc'ed string, freed with bs_free_error_msg.
//
// In a batched call the message has one line per failed point:
// "<index>\t<Stan's message>".

#ifndef BREAD_STAN_BRIDGE_HPP
#define BREAD_STAN_BRIDGE_HPP

#define BREAD_EXPORT __attribute__((visibility("default")))
#define BREAD_ABI_VERSION 4

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bs_model bs_model;
typedef struct bs_rng bs_rng;
typedef void (*STREAM_CALLBACK)(const char* data, int size);

BREAD_EXPORT extern const int bs_major_version;
BREAD_EXPORT extern const int bs_minor_version;
BREAD_EXPORT extern const int bs_patch_version;

BREAD_EXPORT bs_model* bs_model_construct(const char* data, unsigned int seed,
                                          char** error_msg);
BREAD_EXPORT void bs_model_destruct(bs_model* m);
BREAD_EXPORT void bs_free_error_msg(char* error_msg);
BREAD_EXPORT const char* bs_name(const bs_model* m);
BREAD_EXPORT const char* bs_model_info(const bs_model* m);
BREAD_EXPORT const char* bs_param_names(const bs_model* m, bool include_tp,
                                        bool include_gq);
BREAD_EXPORT const char* bs_param_unc_names(const bs_model* m);
BREAD_EXPORT int bs_param_num(const bs_model* m, bool include_tp, bool include_gq);
BREAD_EXPORT int bs_param_unc_num(const bs_model* m);
BREAD_EXPORT int bs_param_constrain(const bs_model* m, bool include_tp, bool include_gq,
                                    const double* theta_unc, double* theta,
                                    bs_rng* rng, char** error_msg);
BREAD_EXPORT int bs_param_unconstrain(const bs_model* m, const double* theta,
                                      double* theta_unc, char** error_msg);
BREAD_EXPORT int bs_param_unconstrain_json(const bs_model* m, const char* json,
                                           double* theta_unc, char** error_msg);
BREAD_EXPORT int bs_param_initialize(const bs_model* m, const char* json, bs_rng* rng,
                                     double init_radius, int max_tries, bool jacobian,
                                     double* theta_unc, char** error_msg);
BREAD_EXPORT int bs_log_density(const bs_model* m, bool propto, bool jacobian,
                                const double* theta_unc, double* lp, char** error_msg);
BREAD_EXPORT int bs_log_density_gradient(const bs_model* m, bool propto, bool jacobian,
                                         const double* theta_unc, double* lp,
                                         double* grad, char** error_msg);
BREAD_EXPORT int bs_log_density_hessian(const bs_model* m, bool propto, bool jacobian,
                                        const double* theta_unc, double* lp,
                                        double* grad, double* hessian,
                                        char** error_msg);
BREAD_EXPORT int bs_log_density_hessian_vector_product(
    const bs_model* m, bool propto, bool jacobian, const double* theta_unc,
    const double* vector, double* lp, double* hvp, char** error_msg);
BREAD_EXPORT bs_rng* bs_rng_construct(unsigned int seed, char** error_msg);
BREAD_EXPORT void bs_rng_destruct(bs_rng* rng);
BREAD_EXPORT int bs_set_print_callback(STREAM_CALLBACK callback, char** error_msg);

// Version of the bread_* extensions below.
BREAD_EXPORT int bread_abi_version();

// Log densities of n points (theta_unc is n x d, row-major) into lp[n].
BREAD_EXPORT int bread_log_density_batch(const bs_model* m, bool propto, bool jacobian,
                                         int n, const double* theta_unc, double* lp,
                                         int threads, char** error_msg);
// Log densities and gradients (grad is n x d) of n points.
BREAD_EXPORT int bread_log_density_gradient_batch(const bs_model* m, bool propto,
                                                  bool jacobian, int n,
                                                  const double* theta_unc, double* lp,
                                                  double* grad, int threads,
                                                  char** error_msg);
// Prior/likelihood split from a prior_only=1 and a prior_only=0 instance:
// log_lik = full - prior, grad_lik = grad_full - grad_prior.  Gradients are
// skipped when grad_prior or grad_lik is NULL.
BREAD_EXPORT int bread_split_batch(const bs_model* prior, const bs_model* full,
                                   bool jacobian, int n, const double* theta_unc,
                                   double* log_prior, double* log_lik,
                                   double* grad_prior, double* grad_lik, int threads,
                                   char** error_msg);
// One HMC transition for each of n chains of the tempered density
// log prior + beta * log lik (prior, full as in bread_split_batch; prior NULL:
// the joint of `full` alone, reported as the log prior with log lik 0; or, with
// base not NULL and prior NULL, a Gaussian base q0 as the log prior and
// log p~ - log q0 as the log lik: see gaussian_base_point in bridge.cpp; with base
// and prior both given, the prior's log density as the log prior and log q0 minus it
// as the log lik, full giving only the dimension: see prior_base_point), as
// bread_stan.kernels.hmc does it, bit for bit.  Inputs per chain: the state
// (q0 n x d, lp0, ll0, gradients gp0, gl0 n x d), beta, step size, number of
// leapfrog steps, inverse metric (n x d, or n x d x d when dense; when shared,
// one d or d x d metric for every chain), initial momentum (n x d) and log of
// the acceptance uniform.  Outputs: the new state
// (q, lp, ll, gp, gl), stats (n x 2: H0 - H1, or -inf when the trajectory
// left the support; H1 - H0, or inf) and flags (n x 3: accepted, divergent,
// gradients used).  Chains are spread over threads; results do not depend on it.
BREAD_EXPORT int bread_hmc_transition(
    const bs_model* prior, const bs_model* full, const double* base, bool base_dense, int n, const double* q0,
    const double* lp0, const double* ll0, const double* gp0, const double* gl0,
    const double* beta, const double* step_size, const long long* n_leapfrog, bool dense,
    bool shared, const double* inv_metric, const double* momentum, const double* log_u,
    double* q, double* lp, double* ll, double* gp, double* gl, double* stats,
    long long* flags, int threads, char** error_msg);
// One NUTS transition (bread_stan.kernels.nuts, bit for bit) for each of n
// chains, arguments as above with max_depth instead of leapfrog counts and the
// next k log-uniforms of each chain's stream (n x k).  stats: n x 2 (sum over
// leapfrog steps of min(1, exp(H0 - H)); H - H0 of the sample); flags: n x 4
// (divergent, gradients used, tree depth, log-uniforms used; -1 when k was too
// few for that chain, whose outputs are then not valid: call again with more).
BREAD_EXPORT int bread_nuts_transition(
    const bs_model* prior, const bs_model* full, const double* base, bool base_dense, int n, const double* q0,
    const double* lp0, const double* ll0, const double* gp0, const double* gl0,
    const double* beta, const double* step_size, int max_depth, bool dense,
    bool shared, const double* inv_metric, const double* momentum, const double* log_u, int k,
    double* q, double* lp, double* ll, double* gp, double* gl, double* stats,
    long long* flags, int threads, char** error_msg);
// Constrained (n x num_params) -> unconstrained (n x d).
BREAD_EXPORT int bread_param_unconstrain_batch(const bs_model* m, int n,
                                               const double* theta, double* theta_unc,
                                               char** error_msg);
// Unconstrained -> constrained (with transformed parameters if include_tp).
BREAD_EXPORT int bread_param_constrain_batch(const bs_model* m, bool include_tp, int n,
                                             const double* theta_unc, double* theta,
                                             int threads, char** error_msg);
// All outputs (parameters, transformed parameters, generated quantities) for
// draws first..first+n-1; draw k uses the RNG create_rng(seed, k + 1).
BREAD_EXPORT int bread_generate_batch(const bs_model* m, unsigned int seed,
                                      long long first, int n, const double* theta_unc,
                                      double* out, int threads, char** error_msg);
// Tight C++ loop: `repeats` passes of gradients over n points; wall time in
// *seconds.
BREAD_EXPORT int bread_bench_gradient(const bs_model* m, int n, const double* theta_unc,
                                      int repeats, double* seconds, char** error_msg);

#ifdef __cplusplus
}
#endif

#endif
