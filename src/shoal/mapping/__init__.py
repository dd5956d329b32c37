"""Topology-aware process mapping: patterns, mappings, contention metrics (Balaji11)."""
