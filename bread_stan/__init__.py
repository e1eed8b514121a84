"""bread_stan: bidirectional Monte Carlo bounds on the accuracy of MCMC for Stan models."""

__version__ = "0.1.0"
