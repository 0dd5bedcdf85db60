"""Schedd backends: the interface every backend implements, and the backends that ship with the gateway."""
