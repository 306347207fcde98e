"""What every RL algorithm shares: the training budget and evaluation settings, the evaluator
worker, and the driver loop that places everything, evaluates, checkpoints and stops."""
