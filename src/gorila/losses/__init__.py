"""Losses and their targets as pure functions of tensors (returns, TD targets, policy-gradient losses)."""
