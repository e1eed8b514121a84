"""Annealed importance sampling: beta schedules, pilot tuning into frozen per-temperature
kernels, the forward/reverse engine, the estimators on per-chain log weights, results.

Built on ``kernels`` and the ``target`` interface; the workflows call it.
"""
