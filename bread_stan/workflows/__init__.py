"""What a user runs: BREAD on simulated data (``bread``, ``compare``), the real-data
protocol with its NUTS fit and its agreement and S-sweep statistics.

Each workflow wires the Stan layer to the AIS engine and returns a result object.
"""
