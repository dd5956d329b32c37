"""Tori and meshes, routing models and link loads (seed 004, Section 3.1)."""
