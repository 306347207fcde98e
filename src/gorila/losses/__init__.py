"""Losses and their targets as pure functions (returns, TD targets, policy-gradient losses)."""
