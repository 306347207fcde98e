"""Deterministic synthetic data, generated in fixed chunks so any partition sees the same rows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gorila.errors import ConfigError

CHUNK_ROWS = 256  # rows per generator chunk; a worker owns whole chunks


def num_chunks(n: int) -> int:
    return -(-n // CHUNK_ROWS)


def partition(n: int, workers: int) -> list[range]:
    """Chunk ranges of each worker, as equal as whole chunks allow."""
    chunks = num_chunks(n)
    if workers > chunks:
        raise ConfigError("workers", f"must be <= {chunks} for n={n} ({CHUNK_ROWS} rows per chunk), "
                                     f"got {workers}")
    bounds = [k * chunks // workers for k in range(workers + 1)]
    return [range(a, b) for a, b in zip(bounds[:-1], bounds[1:])]


def rows(seed: int, n: int, d: int, noise: float, condition: float, chunks: range) -> tuple[np.ndarray, np.ndarray]:
    """``X`` (float32, rows of ``chunks``) and ``y``; the same rows whoever generates them."""
    scales = condition ** (-np.arange(d) / (2.0 * max(d - 1, 1)))
    w_true = np.random.default_rng([seed, 0]).standard_normal(d)
    xs, ys = [], []
    for c in chunks:
        rng = np.random.default_rng([seed, 1, c])
        m = min(CHUNK_ROWS, n - c * CHUNK_ROWS)
        x = rng.standard_normal((m, d)) * scales
        xs.append(x.astype(np.float32))
        ys.append((x @ w_true + noise * rng.standard_normal(m)).astype(np.float32))
    if not xs:
        return np.zeros((0, d), np.float32), np.zeros(0, np.float32)
    return np.concatenate(xs), np.concatenate(ys)


@dataclass(frozen=True)
class Moments:
    """``A = X^T X``, ``b = X^T y``, ``c = y^T y`` (float64): the loss anywhere, without the data."""

    a: np.ndarray
    b: np.ndarray
    c: float
    n: int

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
