"""Tori and meshes, routing models and link loads (Balaji11, Section 3.1)."""
