"""Tessera: a standalone Kubernetes scheduler for GPU batch work."""

__version__ = "0.1.0"
