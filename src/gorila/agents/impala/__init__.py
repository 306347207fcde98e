"""IMPALA: actors emit segments into trajectory queues, learners push V-trace gradients to the parameter server."""
