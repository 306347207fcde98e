"""What every ``gorila bench NAME --out DIR`` writes: ``DIR/bench.json``.

Each row holds a figure beside the limit measured in the same run and their ratio, so results can
be compared across commits and machines::

    out = bench_dir(args.out, "sampling")
    write_bench_json(out, "sampling", vars(args), rows=[{"runtime": "ray", "steps_per_s": 290e3,
                     "limit_steps_per_s": 365e3, "ratio": 0.80}])
"""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from gorila.atomic import write_json


def bench_dir(out: Path | None, name: str) -> Path:
    """``out``, or ``bench-out/<name>-<time>``; created."""
    path = Path(out) if out is not None else Path("bench-out") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def machine() -> dict[str, Any]:
    """Where the figures were taken."""
    import numpy

    facts = {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
             "numpy": numpy.__version__}
    torch = sys.modules.get("torch")  # reported when the benchmark used it, never imported for this
    if torch is not None:
        facts["torch"] = torch.__version__
        facts["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return facts


def write_bench_json(out: Path, name: str, settings: dict[str, Any], rows: list[dict[str, Any]],
                     *, command: list[str] | None = None, **figures: Any) -> Path:
    """``out/bench.json``: the benchmark, the command (``gorila bench NAME ...`` unless given), the
    machine, its settings, one row per measurement, and any headline ``figures``."""
    path = out / "bench.json"
    command = command if command is not None else ["gorila", "bench", name, *sys.argv[3:]]
    write_json(path, {"bench": name, "command": command,
                      "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(),
                      "settings": settings, **figures, "rows": rows})
    print(f"wrote {path}")
    return path
