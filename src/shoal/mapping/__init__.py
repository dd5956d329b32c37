"""Topology-aware process mapping: patterns, mappings, contention metrics (seed 004)."""
