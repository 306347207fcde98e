"""Ape-X: many actors with their own exploration, prioritized replay as a sharded service, n-step returns,
and a learner fed by prefetch."""
