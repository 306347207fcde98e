"""Learners: turn experience into gradients pushed to the parameter server (the
:class:`~gorila.core.Learner` role), and the workers built around them.

=====================  ===============================================================
``q_learner``          ``QLearner`` (double-Q or max-Q gradients), ``OutlierFilter``
``target``             ``TargetUpdate``: when the target network follows the server
``bundle``             ``Bundle``: Gorila's bundled mode (actor + local replay + learner)
``replay_learner``     ``ReplayLearner``: a learner fed by the global replay's shards
``a3c``                ``A3CWorker``: acts and computes A3C / A2C gradients in one place
``lstsq``              ``LstsqWorker``: map and local reduce of least squares
=====================  ===============================================================

Import the module you need: ``lstsq`` workers must not pay for importing torch.
"""
