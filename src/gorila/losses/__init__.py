"""Loss functions: pure functions of tensors."""
