"""shoal: an adaptive runtime for parallel programs on HPC clusters, with the system knowledge
such a runtime needs (gossip-spread node state, communication models, topology and mapping)."""

from shoal.errors import ShoalError, UsageError, WireError

__version__ = "0.1.0"

__all__ = ["ShoalError", "UsageError", "WireError", "__version__"]
