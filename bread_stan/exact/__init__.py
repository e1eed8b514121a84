"""Known answers for testing the samplers: the exact 7 x 7 grid oracle (SPEC section 6)
and conjugate Gaussian targets with closed-form log p(y) and posterior.
"""
