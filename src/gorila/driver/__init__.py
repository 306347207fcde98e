"""The driver: one experiment loop for every algorithm.

=====================  ===============================================================
``plan``               ``Plan`` (what a builder hands the driver), ``WorkerSpec``,
                       ``ServiceSpec``, ``Budget``, the ``Evaluation`` protocol, ``Score``,
                       ``Placed`` (what the driver placed of a plan)
``loop``               ``run(run_config, plan)``: place, run in chunks, judge, log,
                       checkpoint, stop
``chunks``             ``Chunks``: the groups' chunks sized, collected, stalled workers
                       restarted
``report``             ``Report``: rows, evaluations, checkpoints, ``summary.json``
``progress``           ``Progress``: the budget used and the training time
``counters``           ``Counters``: totals over workers that may restart
``policy_evaluation``  ``PolicyEvaluation`` and its ``Evaluator`` worker (RL algorithms)
``saved``              ``SavedRun``: a run directory read back
=====================  ===============================================================

The driver imports no algorithm and owns no algorithm's config; builders in :mod:`gorila.agents`
import it (the RL algorithms' shared settings are :mod:`gorila.agents.rl_config`).
"""
