"""A family defined outside the package (a plug-in, a test's worked example) joined to the tools for a while."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from vision_factory.families import registry
from vision_factory.families.family import Family


@contextmanager
def registered(spec: Family) -> Iterator[Family]:
    """``spec`` in the registry (and its rule in recognition) inside the block, forgotten after."""
    registry.register(spec)
    try:
        yield spec
    finally:
        registry.unregister(spec.name)
