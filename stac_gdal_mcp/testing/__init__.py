"""Synthetic data for tests, benchmarks and the bundled sample catalog (never imported at run time)."""
