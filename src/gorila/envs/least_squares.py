"""The synthetic least-squares problem lstsq trains on: deterministic rows, generated in fixed
chunks so that any partition among workers sees the same rows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gorila.errors import ConfigError

CHUNK_ROWS = 256  # rows per generator chunk; a worker owns whole chunks


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
