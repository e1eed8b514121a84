"""Where a run's independent pieces execute: here, or on a Dask cluster."""
