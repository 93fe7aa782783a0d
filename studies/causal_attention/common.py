"""What run.py and report.py of the causal_attention study share: sampling tokens from a position-dependent density on
S^1, the Rényi (parking) centers, cluster counts on the circle, and the W2 per window of positions between causal
particles and the causal continuum (the package's exact W2, :func:`meanfield.analysis.transport.w2_distance`)."""

from __future__ import annotations

import math

import numpy as np

from meanfield.analysis.transport import w2_distance

PARKING_CONSTANT = 0.7475979202534114
"""Rényi's parking constant (the jamming density of random sequential adsorption on a line)."""


def renyi_delta(beta):
    """The separation of the Rényi centers of Karagodin, Polyanskiy and Rigollet: ``4 beta^(-1/2)``."""
    return 4.0 / math.sqrt(beta)


def parking_prediction(beta, length=2 * math.pi):
    """Jamming-limit count of Rényi centers on a circle of ``length``: ``0.7476 length / delta``."""
    return PARKING_CONSTANT * length / renyi_delta(beta)


def renyi_centers(X, delta):
    """Indices of the Rényi centers of unit vectors ``X`` (n, d) in token order: token ``i`` is a center when its
    geodesic distance to every earlier center is at least ``delta`` (the greedy sequential parking of the tokens)."""
    X = np.asarray(X, float)
    centers = []
    for i in range(X.shape[0]):
        if not centers or np.arccos(np.clip(X[centers] @ X[i], -1.0, 1.0)).min() >= delta:
            centers.append(i)
    return centers


def sphere_clusters(X, gap):
    """Number of groups of unit vectors linked by geodesic distances below ``gap`` (single linkage)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    X = np.asarray(X, float) / np.linalg.norm(X, axis=1, keepdims=True)
    A = np.arccos(np.clip(X @ X.T, -1.0, 1.0)) < gap
    return int(connected_components(csr_matrix(A), directed=False)[0])


def circle_clusters(theta, gap):
    """Number of groups of angles on the circle separated by gaps larger than ``gap`` (radians), and their sizes."""
    a = np.sort(np.mod(theta, 2 * math.pi))
    if a.size == 1:
        return 1, np.array([1])
    d = np.diff(np.concatenate([a, [a[0] + 2 * math.pi]]))
    cuts = np.nonzero(d > gap)[0]
    if cuts.size == 0:
        return 1, np.array([a.size])
    sizes = np.diff(np.concatenate([cuts, [cuts[0] + a.size]]))
    return int(cuts.size), sizes


def sample_tokens(rng, n, profile, bound):
    """Tokens (n, 2) on S^1 in order: token ``i`` at position ``s_i = (i + 1/2) / n`` drawn from the density
    ``profile(theta, s)`` (relative to ``dtheta / 2 pi``, at most ``bound``) by rejection."""
    s = (np.arange(n) + 0.5) / n
    theta = np.empty(n)
    todo = np.arange(n)
    while todo.size:
        th = rng.uniform(0, 2 * math.pi, todo.size)
        ok = rng.uniform(0, bound, todo.size) < profile(th, s[todo])
        theta[todo[ok]] = th[ok]
        todo = todo[~ok]
    return np.column_stack([np.cos(theta), np.sin(theta)])


def w2_windows(X, pde, c, windows, nodes=2048):
    """W2 (geodesic, exact) per window of positions between the tokens ``X`` (n, 2, in order, token ``i`` at
    ``(i + 1/2) / n``) and the continuum state ``c`` of ``pde`` averaged over the same window; shape (windows,).

    The window's density is put on ``nodes`` equispaced angles (midpoint masses; the discretization adds at most
    ``pi / nodes`` to W2).  A negative density is refused (never clipped)."""
    n = X.shape[0]
    s = (np.arange(n) + 0.5) / n
    th = 2 * math.pi * (np.arange(nodes) + 0.5) / nodes
    Y = np.column_stack([np.cos(th), np.sin(th)])
    out = np.empty(windows)
    for p in range(windows):
        lo, hi = p / windows, (p + 1) / windows
        cw = pde.window(c, lo, hi)
        k = np.arange(cw.size)
        f = (cw[0].real + 2 * (cw[1:, None] * np.exp(1j * k[1:, None] * th[None, :])).real.sum(axis=0))
        if f.min() < 0:
            raise ValueError(f"the continuum density of window {p} is negative (min {f.min():.3g}): not resolved")
        b = f / f.sum()
        sel = (s >= lo) & (s < hi)
        out[p] = w2_distance(X[sel], Y, None, b, metric="geodesic", method="exact").distance
    return out


def window_index(n, windows):
    """Window of positions (0..windows-1) of each of ``n`` tokens at ``s_i = (i + 1/2) / n``."""
    s = (np.arange(n) + 0.5) / n
    return np.minimum((s * windows).astype(int), windows - 1)


def window_means(values, windows):
    """Means of ``values`` (..., n) over the tokens of each window of positions, shape (..., windows)."""
    idx = window_index(np.shape(values)[-1], windows)
    return np.stack([np.asarray(values)[..., idx == p].mean(axis=-1) for p in range(windows)], axis=-1)


def sample_sphere_tokens(rng, n, profile, bound):
    """Tokens (n, 3) on S^2 in order: token ``i`` at ``s_i = (i + 1/2) / n`` drawn from the density
    ``profile(X, s)`` (relative to the surface measure, at most ``bound``) by rejection."""
    s = (np.arange(n) + 0.5) / n
    X = np.empty((n, 3))
    todo = np.arange(n)
    while todo.size:
        Y = rng.standard_normal((todo.size, 3))
        Y /= np.linalg.norm(Y, axis=1, keepdims=True)
        ok = rng.uniform(0, bound, todo.size) < profile(Y, s[todo])
        X[todo[ok]] = Y[ok]
        todo = todo[~ok]
    return X


def sphere_w2_windows(X, pde, c, windows, lmax_grid=None):
    """W2 (geodesic, exact) per window of positions between tokens ``X`` (n, 3, in order) and the average density
    of a :class:`~meanfield.models.causal_continuum.CausalSpherePDE` state ``c`` over the same window, put on the
    nodes of a Gauss-Legendre grid with their weights (``SphereGrid.dealiased(lmax_grid)``, default the model's; the
    coefficients zero-padded to that degree; the grid's spacing bounds how small W2 can get); shape (windows,).  A
    negative density is refused (never clipped)."""
    from meanfield.core.sphere import SphereGrid, resize_coefficients

    g = pde.grid if lmax_grid is None else SphereGrid.dealiased(lmax_grid)
    nodes = g.nodes.reshape(-1, 3)
    area = (g.ring_weights[:, None] * np.ones(g.shape[1])[None, :]).ravel()
    idx = window_index(X.shape[0], windows)
    out = np.empty(windows)
    for p in range(windows):
        cw = pde.window(c, p / windows, (p + 1) / windows)
        if lmax_grid is not None:
            cw = resize_coefficients(cw, pde.lmax, lmax_grid)
        f = g.synthesis(cw).ravel()
        if f.min() < 0:
            raise ValueError(f"the continuum density of window {p} is negative (min {f.min():.3g}): not resolved")
        b = f * area
        out[p] = w2_distance(X[idx == p], nodes, None, b / b.sum(), metric="geodesic", method="exact").distance
    return out
