"""Algorithms assembled from gorila components: one subpackage (config, networks, builder) each."""
