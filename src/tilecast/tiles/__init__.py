"""Tiles, waves, roofline bounds and feature vectors (pure numpy, vectorised)."""
