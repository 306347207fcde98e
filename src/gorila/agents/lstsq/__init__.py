"""MapReduce parallel gradient descent on synthetic least squares (the first workload)."""
