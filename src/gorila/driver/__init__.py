"""The driver: one experiment loop for every algorithm.

=====================  ===============================================================
``plan``               ``Plan`` (what a builder hands the driver), ``WorkerSpec``,
                       ``ServiceSpec``, ``Budget``, the ``Evaluation`` protocol, ``Score``
``loop``               ``run(run_config, plan)``: place, run in chunks, judge, log,
                       checkpoint, stop
``counters``           ``Counters``: totals over workers that may restart
``rl_config``          ``RLConfig``: env, step budget, evaluation, device (RL algorithms)
``policy_evaluation``  ``PolicyEvaluation`` and its ``Evaluator`` worker (RL algorithms)
``saved``              ``SavedRun``: a run directory read back
=====================  ===============================================================

The driver imports no algorithm; builders in :mod:`gorila.algos` import it.
"""
