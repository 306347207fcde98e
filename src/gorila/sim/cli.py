"""``gorila simulate``: predict speedup, staleness and load for 1 to thousands of workers.

Measure this machine once, then ask about any cluster::

    gorila simulate --calibrate --out calibration.json
    gorila simulate --calibration calibration.json --algo a3c --workers 1,2,4,...,4096 --shards 4 \\
        --nodes 4 --cores-per-node 16 --param-cache node --stragglers 0.05:4 --out sim-out

and check its predictions against runs made on the calibrated machine (each run's own settings
predicted, beside what it measured, and the error)::

    gorila simulate --calibration calibration.json --check runs/lstsq-sync-2 runs/a3c-async-2
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from gorila import validate
from gorila.agents.registry import ALGORITHMS
from gorila.cliargs import command_parser
from gorila.errors import ConfigError
from gorila.params.rule import MODE_KNOBS, MODES
from gorila.sim.model import Stragglers

DEFAULT_COUNTS = "1,2,4,8,16,32,64,128,256,512,1024,2048,4096"


def _counts(text: str) -> tuple[int, ...]:
    """``--workers``: counts >= 1, comma-separated; ``1,2,...,64`` doubles up to 64."""
    parts = text.split(",")
    try:
        if len(parts) >= 3 and parts[-2] in ("...", "…"):
            first, top = int(parts[0]), int(parts[-1])
            counts = [first]
            while counts[-1] * 2 <= top:
                counts.append(counts[-1] * 2)
        else:
            counts = [int(p) for p in parts]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"comma-separated counts >= 1 (or 1,2,...,N), got {text!r}")
    return tuple(sorted(set(counts)))


def _modes(text: str) -> tuple[str, ...]:
    modes = tuple(m.strip() for m in text.split(","))
    if not modes or any(m not in MODES for m in modes):
        raise argparse.ArgumentTypeError(f"comma-separated rules among {', '.join(MODES)}, got {text!r}")
    return modes


def _stragglers(text: str) -> Stragglers:
    """``--stragglers P:F``: probability ``P`` in [0, 1] that a gradient takes ``F`` >= 1 times as long."""
    try:
        p, f = (float(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"P:F (e.g. 0.05:4), got {text!r}") from None
    if not (0.0 <= p <= 1.0 and f >= 1.0):
        raise argparse.ArgumentTypeError(f"P in [0, 1] and F >= 1, got {text!r}")
    return Stragglers(p, f)


def _parser() -> argparse.ArgumentParser:
    parser = command_parser("gorila simulate", __doc__)
    parser.add_argument("--calibrate", action="store_true",
                        help="measure this machine's costs (compute, shard apply, transport) and write them to --out")
    parser.add_argument("--calibration", type=Path, default=None, metavar="FILE",
                        help="the measured costs to predict from (written by --calibrate)")
    parser.add_argument("--check", type=Path, nargs="+", default=None, metavar="RUN_DIR",
                        help="predict each run's own settings (its rule, workers, shards, cache, straggler) on the "
                             "calibrated machine and print the prediction beside what the run measured (updates and "
                             "env steps per second, mean staleness) with the error; with --out, check.json there")
    parser.add_argument("--algo", default="a3c", choices=sorted(ALGORITHMS),
                        help="workload (dqn and apex: only with their costs added to the calibration file)")
    parser.add_argument("--mode", type=_modes, default=MODES, help="update rules, comma-separated")
    parser.add_argument("--workers", type=_counts, default=_counts(DEFAULT_COUNTS),
                        help="worker counts, comma-separated, or 1,2,...,N for the powers of two up to N")
    parser.add_argument("--shards", type=int, default=1, help="parameter-server shards")
    parser.add_argument("--param-cache", choices=("none", "node"), default="none",
                        help="node: a parameter cache per node pulls each version once; workers read it "
                             "(read cost --cache-read-us)")
    parser.add_argument("--stragglers", type=_stragglers, default=None, metavar="P:F",
                        help="also predict with a fraction P of gradients taking F times as long")
    parser.add_argument("--slow-worker", type=float, default=1.0, metavar="F",
                        help="worker 0's every gradient takes F times as long (as gorila train --straggler F)")
    cluster = parser.add_argument_group("cluster (default: this machine, from the calibration)")
    cluster.add_argument("--cluster", type=Path, default=None, metavar="FILE",
                         help="JSON with any of nodes, cores_per_node, latency_s, bandwidth_Bps, cache_read_s")
    cluster.add_argument("--nodes", type=int, default=None, help="nodes; workers are placed round-robin")
    cluster.add_argument("--cores-per-node", type=int, default=None, help="cores per node")
    cluster.add_argument("--latency-us", type=float, default=None, help="one-way message latency, microseconds")
    cluster.add_argument("--bandwidth-gbps", type=float, default=None, help="link bandwidth, Gbit/s")
    cluster.add_argument("--cache-read-us", type=float, default=None,
                         help="a worker's read of its node's parameter cache, microseconds")
    what_if = parser.add_argument_group("what if (override the measured workload)")
    what_if.add_argument("--params", type=int, default=None, help="parameters of the model (e.g. 1687206: Nature CNN)")
    what_if.add_argument("--compute-ms", type=float, default=None,
                         help="compute time of one gradient, ms, in place of the measured samples (every gradient "
                              "takes this long; --stragglers then adds the spread)")
    rule = parser.add_argument_group("rule knobs (as gorila train)")
    rule.add_argument("--max-staleness", type=int, default=None, help="async: reject pushes staler than this")
    rule.add_argument("--aggregate", type=int, default=None, help="semi-async: counted pushes per update")
    rule.add_argument("--count-within", type=int, default=None, help="semi-async: staleness up to which a push counts")
    rule.add_argument("--accept-within", type=int, default=None,
                      help="semi-async: staleness up to which a push joins the update")
    parser.add_argument("--gradients-per-worker", type=int, default=5,
                        help="pushes simulated per worker, >= 2 (at least 1000 in all; each worker's first is not "
                             "measured)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulated compute times")
    parser.add_argument("--seconds", type=float, default=3.0, help="--calibrate: seconds per compute measurement")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory of the outputs, or with --calibrate the file to write "
                             "(default: sim-out, or calibration.json)")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.calibrate:
        return _calibrate(args)
    if args.check is not None:
        return _check(args)
    return _simulate(args)


def _check(args: argparse.Namespace) -> int:
    from gorila.atomic import write_json
    from gorila.sim.calibration import Calibration
    from gorila.sim.check import CHECK_HEADER, check_run

    if args.calibration is None:
        raise ConfigError("calibration", "required: write one with gorila simulate --calibrate --out FILE")
    calibration = Calibration.load(args.calibration)
    print("each run: measured → predicted (error)")
    print(CHECK_HEADER)
    checks = []
    for run_dir in args.check:
        checks.append(check_run(run_dir, calibration, seed=args.seed))
        print(checks[-1].line(), flush=True)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        write_json(args.out / "check.json", {"calibration": str(args.calibration),
                                              "runs": [c.as_dict() for c in checks]})
        print(f"wrote {args.out / 'check.json'}")
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    validate.number("seconds", args.seconds, low=0.0, low_open=True)
    from gorila.sim.calibrate import calibrate

    out = args.out or Path("calibration.json")
    calibration = calibrate(seconds=args.seconds)
    calibration.save(out)
    print(f"transport {calibration.transport}: latency {calibration.latency_s * 1e6:.0f} us, "
          f"bandwidth {calibration.bandwidth_Bps / 1e9:.2f} GB/s")
    for name, work in calibration.workloads.items():
        medians = ", ".join(f"{k} at once {sorted(v)[len(v) // 2] * 1e3:.2f} ms" for k, v in work.compute_s.items())
        print(f"{name}: {work.params:,} parameters, gradient {medians}")
    print(f"wrote {out}")
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from gorila.sim.calibration import Calibration
    from gorila.sim.cluster import Cluster
    from gorila.sim.sweep import HEADER, Sweep, sweep, write_outputs

    if args.calibration is None:
        raise ConfigError("calibration", "required: write one with gorila simulate --calibrate --out FILE")
    validate.integer("shards", args.shards, low=1)
    validate.integer("gradients_per_worker", args.gradients_per_worker, low=2)
    validate.number("slow_worker", args.slow_worker, low=1.0)
    for name in ("latency_us", "cache_read_us"):
        if getattr(args, name) is not None:
            validate.number(name, getattr(args, name), low=0.0)
    for name in ("bandwidth_gbps", "compute_ms"):
        if getattr(args, name) is not None:
            validate.number(name, getattr(args, name), low=0.0, low_open=True)
    knobs = {k: getattr(args, k) for k in ("max_staleness", "aggregate", "count_within", "accept_within")
             if getattr(args, k) is not None}
    for knob in knobs:  # a knob no rule of --mode takes is refused by name, before anything runs
        if not any(knob in MODE_KNOBS[mode] for mode in args.mode):
            owner = next(m for m, names in MODE_KNOBS.items() if knob in names)
            raise ConfigError(knob, f"applies to --mode {owner} only (--mode is {','.join(args.mode)})")
    from gorila.params import UpdateRule

    for mode in args.mode:  # the knobs' values are checked by the rule itself
        UpdateRule.for_mode_knobs(mode, 1, knobs)
    calibration = Calibration.load(args.calibration)
    work = calibration.workload(args.algo)
    if args.params is not None:
        validate.integer("params", args.params, low=1)
        work = replace(work, params=args.params)
    if args.compute_ms is not None:
        work = replace(work, compute_s={1: (args.compute_ms / 1e3,)})
    cluster = Cluster.of(calibration, args.cluster, nodes=args.nodes, cores_per_node=args.cores_per_node,
                         latency_s=_scaled(args.latency_us, 1e-6), cache_read_s=_scaled(args.cache_read_us, 1e-6),
                         bandwidth_Bps=_scaled(args.bandwidth_gbps, 1e9 / 8))
    out = args.out or Path("sim-out")
    spec = Sweep(work, cluster, calibration.apply_s, args.mode, args.workers, shards=args.shards,
                 param_cache=args.param_cache == "node", stragglers=args.stragglers, slow_worker=args.slow_worker,
                 rule_knobs=knobs, gradients_per_worker=args.gradients_per_worker, seed=args.seed)
    print(f"gorila simulate: {args.algo}, {work.params:,} parameters, {args.shards} shard(s), "
          f"parameter cache {args.param_cache}; {cluster.describe()}")
    print(HEADER)
    points = sweep(spec, progress=print)
    title = (f"{args.algo}: {args.shards} shard(s), cache {args.param_cache}, {cluster.nodes} node(s) x "
             f"{cluster.cores_per_node} cores"
             + (f", stragglers {args.stragglers.probability:g}:{args.stragglers.factor:g}" if args.stragglers else ""))
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "stragglers"}
    settings["stragglers"] = None if args.stragglers is None else [args.stragglers.probability,
                                                                   args.stragglers.factor]
    write_outputs(spec, points, out, title, settings)
    return 0


def _scaled(value: float | None, unit: float) -> float | None:
    return None if value is None else value * unit
