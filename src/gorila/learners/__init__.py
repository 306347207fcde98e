"""The learners several algorithms share: they turn experience into gradients pushed to the
parameter server (the :class:`~gorila.core.Learner` role). An algorithm's own learner lives in its
folder of :mod:`gorila.agents`.

=====================  ===============================================================
``q_learner``          ``QLearner`` (double-Q or max-Q gradients), ``OutlierFilter``
``target``             ``TargetUpdate``: when the target network follows the server
``replay_learner``     ``ReplayLearner``: a learner fed by the global replay's shards
``segment_learner``    ``SegmentLearner``: a learner fed by a trajectory queue (IMPALA, PPO)
``device_copy``        ``DeviceCopy``: a GPU learner's minibatches copied ahead of their use
``straggler``          ``Straggler``: one worker's gradients made slower (lstsq, A3C)
=====================  ===============================================================

Import the module you need: ``target`` and ``straggler`` serve processes that never import torch
(the configs, lstsq's workers).
"""
