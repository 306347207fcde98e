"""PPO (``--mode sync``) and APPO (``--mode async``): segment actors, trajectory queues, and learners
running epochs of clipped-surrogate minibatches."""
