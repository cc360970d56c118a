"""The package version, in a module of its own so that nothing below the package face imports it."""

__version__ = "0.1.0"
