"""``gorila simulate``: a discrete-event model of the parameter server's update rules, calibrated
from this machine's measurements.

* :mod:`gorila.sim.model`: workers, real parameter shards, node caches and the network in SimPy;
* :mod:`gorila.sim.calibration` and :mod:`gorila.sim.calibrate`: measured costs, and measuring them;
* :mod:`gorila.sim.cluster`: the cluster a prediction is for;
* :mod:`gorila.sim.sweep` and :mod:`gorila.sim.cli`: sweeps over rules and worker counts, and their outputs.
"""
