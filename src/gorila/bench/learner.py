"""``gorila bench learner``: a learner's rate vs a bare PyTorch loop on the same network, loss and
batches, in the same process and run, in alternating rounds: DQN's bundle learner and Ape-X's
replay learner in updates/s (:mod:`gorila.bench.bundle_learner`, :mod:`gorila.bench.apex_learner`),
IMPALA's and PPO's in env steps learnt from per second (:mod:`gorila.bench.segment_learner`); each
pushing to a parameter-server shard (``--server process``) or owning its parameters and publishing
them (``--server learner``); DQN's with ``--device cuda`` on the GPU."""

from __future__ import annotations

import torch

from gorila import validate
from gorila.bench.sampling import add_common_flags, check_common_flags
from gorila.cliargs import command_parser
from gorila.errors import ConfigError
from gorila.nets.encoders import ENCODERS

ALGOS = ("dqn", "apex", "impala", "ppo")


def main(argv: list[str]) -> int:
    from gorila.agents.dqn.config import DQNConfig
    from gorila.agents.rl_config import DEVICE_COPIES

    parser = command_parser("gorila bench learner", __doc__)
    parser.add_argument("--algo", default="dqn", choices=ALGOS,
                        help="whose learner: dqn or apex (updates/s), impala or ppo (env steps learnt from per second)")
    parser.add_argument("--env", default="CartPole-v1",
                        help="Gymnasium id (MinAtar/Breakout-v1: the MinAtar network; ALE/Pong-v5: the Nature CNN, or "
                             "--encoder's)")
    parser.add_argument("--encoder", default="nature", choices=ENCODERS,
                        help="impala, ppo on image observations: the torso's convolutions (gorila train's --encoder)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help=f"minibatch size (dqn, apex) or segments per batch (impala, ppo) "
                             f"(default: {DQNConfig.batch_size} for dqn, the config's for apex, 1 for impala and ppo)")
    parser.add_argument("--fill", type=int, default=5_000, help="dqn, apex: transitions in the replay first")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="dqn: the learner's device")
    parser.add_argument("--server", default="process", choices=("process", "learner"),
                        help="where the learner's updates are applied: process (pushed to a shard) or learner (the "
                             "learner owns its parameters and optimizer and publishes them to the shard)")
    parser.add_argument("--device-copy", default="both", choices=(*DEVICE_COPIES, "both"),
                        help="dqn on cuda: the next minibatch copied ahead (async), when used (sync), or both in turn")
    add_common_flags(parser, seconds=10.0)
    args = parser.parse_args(argv)
    names = check_common_flags(args)
    if args.batch_size is not None:
        validate.integer("batch_size", args.batch_size, low=1)
    if args.device == "cuda" and args.algo != "dqn":
        raise ConfigError("device", f"cuda is measured for --algo dqn; --algo {args.algo} is measured on cpu")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device", "cuda needs a GPU that torch can see; this machine has none")
    if args.encoder != "nature" and args.algo not in ("impala", "ppo"):
        raise ConfigError("encoder", f"is measured for --algo impala and ppo; --algo {args.algo} has the Nature CNN")
    if args.algo in ("impala", "ppo"):
        from gorila.bench import segment_learner

        return segment_learner.run(args, names)
    validate.integer("fill", args.fill, low=1)
    if args.algo == "apex":
        from gorila.bench import apex_learner

        return apex_learner.run(args, names)
    from gorila.bench import bundle_learner

    return bundle_learner.run(args, names)
