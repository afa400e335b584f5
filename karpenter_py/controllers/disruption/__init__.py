"""Disruption: emptiness, drift and consolidation as upstream, decisions that explain themselves."""
