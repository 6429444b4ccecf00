"""Cluster metadata: the metadata image the broker applies and the (single-node) controller."""
