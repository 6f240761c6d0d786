"""The diary map's 2D layout: principal component analysis of the entries' embeddings.

Why PCA: it is deterministic (the same vectors give the same picture, with no seed), exact,
needs nothing beyond numpy, and is fast enough to compute on a read (10 000 × 384 vectors: one
384 × 384 covariance and its eigen-decomposition, tens of milliseconds). The two leading
components of sentence embeddings separate topics well enough to draw zones around them;
t-SNE or UMAP would cluster more tightly but take seconds, need a seed and a dependency, and
move every point when one entry is added.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import numpy.typing as npt
from threadpoolctl import ThreadpoolController

METHOD = "pca-2d:embeddings-384"
AXES_SAMPLE = 2_000

Vectors = npt.NDArray[np.float32]
Points = npt.NDArray[np.float64]


def project(vectors: Vectors) -> Points:
    """The rows of `vectors` (n × d) as n points in [-1, 1]², on the two directions of most
    variance. Each axis's sign is fixed (its largest loading positive) so that a rerun, or
    another process, draws the same picture, and both axes share one scale (no stretching).

    BLAS runs on one thread: inside a request of a busy server, OpenBLAS's thread pool fought
    the other processes for the cores (10 000 × 384: ~0.8 s threaded, ~0.12 s on one thread
    on the 2-core development machine)."""
    with _blas().limit(limits=1, user_api="blas"):
        return _project(vectors)


@cache
def _blas() -> ThreadpoolController:
    """The process's thread pools, inspected once (the first inspection takes ~0.2 s)."""
    return ThreadpoolController()


def _project(vectors: Vectors) -> Points:
    count = vectors.shape[0]
    if count < 3:
        return np.zeros((count, 2))
    centred = vectors.astype(np.float64) - vectors.mean(axis=0, dtype=np.float64)
    # The axes come from an evenly strided sample (every k-th vector, so still deterministic):
    # 2 000 vectors pin the two leading directions of a 384-d cloud as well as 10 000 do, at a
    # fifth of the covariance's cost; every vector is then projected on them.
    sample = centred[:: max(1, count // AXES_SAMPLE)]
    _, eigenvectors = np.linalg.eigh(sample.T @ sample)  # ascending eigenvalues
    axes = eigenvectors[:, [-1, -2]]
    signs = np.sign(axes[np.abs(axes).argmax(axis=0), [0, 1]])
    axes = axes * np.where(signs == 0, 1.0, signs)
    points: Points = centred @ axes
    scale = float(np.abs(points).max())
    return points / scale if scale > 0 else points
