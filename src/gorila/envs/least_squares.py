"""The synthetic least-squares problem lstsq trains on: deterministic rows, generated in fixed
chunks so that any partition among workers sees the same rows."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import psutil  # type: ignore[import-untyped]  # psutil ships no type hints

from gorila.errors import ConfigError

CHUNK_ROWS = 256  # rows per generator chunk; a worker owns whole chunks

#: The longest set-up a run may ask for: the data's moments and the exact optimum it is judged by
#: are computed before the first round, in the driver.
MAX_SETUP_S = 600.0
#: Of the memory free now, the most a problem's rows and moments may take (as for replay).
MAX_MEMORY_FRACTION = 0.8
#: numpy's lstsq (LAPACK's divide-and-conquer SVD) runs far below the matrix-product speed: on a
#: 3000 × 3000 matrix it took as long as ~60 d³ flops of products (a solve took ~0.7 d³).
SVD_PRODUCTS = 60.0


@dataclass(frozen=True)
class LeastSquares:
    """``min_w (1/2n) ||Xw - y||^2`` on synthetic rows ``x ~ N(0, diag(s^2))``, ``y = x.w_true + noise``::

        problem = LeastSquares(n=100_000, d=100, noise=0.1, condition=10.0, seed=0)
        x, y = problem.rows(problem.partition(workers=4)[k])    # worker k's rows, float32
        moments = problem.moments()                             # the loss anywhere, without the rows

    The scales spread the Hessian's eigenvalues over ``[1/condition, 1]``. Small and picklable: a
    worker generates its own rows where it runs.
    """

    n: int
    d: int
    noise: float
    condition: float
    seed: int = 0

    @property
    def num_chunks(self) -> int:
        return -(-self.n // CHUNK_ROWS)

    def partition(self, workers: int) -> list[range]:
        """Chunk ranges of each worker, as equal as whole chunks allow."""
        chunks = self.num_chunks
        if workers > chunks:
            raise ConfigError("workers", f"must be <= {chunks} for n={self.n} ({CHUNK_ROWS} rows per chunk), "
                                         f"got {workers}")
        bounds = [k * chunks // workers for k in range(workers + 1)]
        return [range(a, b) for a, b in zip(bounds[:-1], bounds[1:])]

    def check_size(self, *, available_bytes: int | None = None, flops_per_s: float | None = None) -> None:
        """Refuse (``ConfigError`` naming ``d``) a problem whose rows and moments do not fit in
        memory or whose set-up would take over :data:`MAX_SETUP_S`, before anything starts::

            LeastSquares(n=1000, d=15_000, noise=0.1, condition=10.0).check_size()   # ConfigError("d")

        The estimate: every worker's float32 rows and the float64 ``d × d`` moments with the
        solver's copies; ``2 n d²`` flops for the moments and the optimum's solve (LU, ``2/3 d³``;
        an SVD, costed at ``SVD_PRODUCTS · d³``, when ``n < d`` leaves the moments singular) at this machine's
        matrix-product speed (``flops_per_s``, measured when not given).
        """
        n, d = self.n, self.d
        need = 4 * n * d + 3 * 8 * d * d
        available = psutil.virtual_memory().available if available_bytes is None else available_bytes
        size = f"n={n} rows of d={d} features"
        if need > MAX_MEMORY_FRACTION * available:
            raise ConfigError("d", f"{size} need about {need / 2**30:.1f} GiB (the rows and the d × d moments), "
                                   f"{available / 2**30:.1f} GiB available (at most {MAX_MEMORY_FRACTION:.0%} may "
                                   "be used); lower --n or --d")
        flops = 2.0 * n * d * d + (2.0 / 3.0 if n >= d else SVD_PRODUCTS) * d ** 3
        seconds = flops / (flops_per_s or _matmul_flops_per_s())
        if seconds > MAX_SETUP_S:
            raise ConfigError("d", f"{size} would take about {seconds / 60:.0f} min on this machine to set up (the "
                                   f"moments and the exact optimum the run is judged by; at most "
                                   f"{MAX_SETUP_S / 60:.0f} min); lower --n or --d")

    def rows(self, chunks: range) -> tuple[np.ndarray, np.ndarray]:
        """``X`` (float32, rows of ``chunks``) and ``y``; the same rows whoever generates them."""
        d = self.d
        scales = self.condition ** (-np.arange(d) / (2.0 * max(d - 1, 1)))
        w_true = np.random.default_rng([self.seed, 0]).standard_normal(d)
        xs, ys = [], []
        for c in chunks:
            rng = np.random.default_rng([self.seed, 1, c])
            m = min(CHUNK_ROWS, self.n - c * CHUNK_ROWS)
            x = rng.standard_normal((m, d)) * scales
            xs.append(x.astype(np.float32))
            ys.append((x @ w_true + self.noise * rng.standard_normal(m)).astype(np.float32))
        if not xs:
            return np.zeros((0, d), np.float32), np.zeros(0, np.float32)
        return np.concatenate(xs), np.concatenate(ys)

    def moments(self, chunks: range | None = None, block: int = 64) -> Moments:
        """The :class:`Moments` of ``chunks`` (default: every row), generated ``block`` chunks at a
        time so the whole data set is never in memory at once."""
        chunks = range(self.num_chunks) if chunks is None else chunks
        total = Moments(np.zeros((self.d, self.d)), np.zeros(self.d), 0.0, 0)
        for start in range(chunks.start, chunks.stop, block):
            x, y = self.rows(range(start, min(start + block, chunks.stop)))
            total = total + Moments.of(x, y)
        return total


@dataclass(frozen=True)
class Moments:
    """``A = X^T X``, ``b = X^T y``, ``c = y^T y`` (float64): the loss anywhere, without the data."""

    a: np.ndarray
    b: np.ndarray
    c: float
    n: int

    @classmethod
    def of(cls, x: np.ndarray, y: np.ndarray) -> Moments:
        x, y = x.astype(np.float64), y.astype(np.float64)
        return cls(x.T @ x, x.T @ y, float(y @ y), len(y))

    def __add__(self, other: Moments) -> Moments:
        return Moments(self.a + other.a, self.b + other.b, self.c + other.c, self.n + other.n)

    def loss(self, w: np.ndarray) -> float:
        w = w.astype(np.float64)
        return float((w @ self.a @ w - 2 * self.b @ w + self.c) / (2 * self.n))

    def gradient(self, w: np.ndarray) -> np.ndarray:
        return (self.a @ w - self.b) / self.n

    def optimum(self) -> np.ndarray:
        # Full-rank moments (n >= d) take an LU solve, about 20 times cheaper than lstsq's SVD.
        if self.n >= len(self.b):
            try:
                return np.linalg.solve(self.a, self.b)
            except np.linalg.LinAlgError:
                pass
        return np.linalg.lstsq(self.a, self.b, rcond=None)[0]

    def iterations_to(self, tol: float, lr: float, limit: int) -> int | None:
        """Full-batch gradient descent iterations (from ``w = 0``) until the suboptimality
        shrinks by ``tol``: what synchronous mode takes exactly, whatever the worker count."""
        w_star = self.optimum()
        best = self.loss(w_star)
        w = np.zeros_like(self.b)
        gap0 = self.loss(w) - best
        for t in range(1, limit + 1):
            w = w - lr * self.gradient(w)
            if self.loss(w) - best <= tol * gap0:
                return t
        return None


def _matmul_flops_per_s(size: int = 384, repeats: int = 3) -> float:
    """This machine's float64 matrix-product speed, from the fastest of a few small products
    (a few milliseconds; an underestimate for large products, so set-up estimates err long)."""
    a = np.random.default_rng(0).standard_normal((size, size))
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - started)
    return 2.0 * size ** 3 / max(best, 1e-9)
