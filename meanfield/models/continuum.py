r"""The mean-field PDE on S^2 (MODEL.md section 3), discretized in spherical harmonics.

.. math:: \partial_t \rho + \mathrm{div}_S(\rho X[\rho]) = \nu \Delta_S \rho,\qquad
          X[\rho] = \sum_h \frac{\nabla_S N_h}{D_h},

with, in the zonal case (``M_h = V_h = lambda_h I``), the potential
``N_h(x) = int K_h(lambda_h <x, y>) rho(y) dy`` (``K_h`` the kernel antiderivative, so
``grad N_h = int k_h V_h P_x y rho``) and ``D_h = 1`` (mean) or
``D_h = Z_h = int k_h(lambda_h <x, y>) rho(y) dy`` (softmax).  Zonal heads are diagonal in
spherical harmonics (Funk-Hecke): ``N_h`` and ``Z_h`` cost one multiply per coefficient.
General heads (any ``M_h``, ``V_h``) use their bi-spherical operators (MODEL.md section 8,
:class:`meanfield.core.bispherical.GeneralOperator`, degree from ``kernel_tol``): the sources are the node
sums of ``rho`` and ``rho y_c`` on the grid, the aggregates are synthesized at the nodes, so the velocity is
the quadrature path's to the kernel's truncation; heads with mean normalization and ``V = c M`` take
``X = c grad N`` with ``N = A_K rho`` truncated at ``lmax`` (for a symmetric ``M``, ``V = M``: the gradient of the
energy, whose identity then holds to round-off as for zonal heads).  Sinkhorn heads solve their scalings on the
grid nodes.  ``summation="quadrature"`` keeps the direct node sums as a checked reference.

The state is the real view (:func:`meanfield.core.sphere.to_real`) of the coefficients ``rho_lm``
up to ``lmax``.  Products are formed on the dealiased grid (``3/2`` rule), so for mean
normalization the projection of ``div(rho X)`` onto degree ``<= lmax`` is exact, the mass
(degree 0) is conserved to round-off and the semi-discrete energy identity
``dE/dt = int |X|^2 rho`` holds to round-off.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace

import numpy as np

from ..core import validate
from ..core.bispherical import GeneralOperator, NodeSources, kernel_degree, operator_norm
from ..core.choices import CONTINUUM_SUMMATIONS
from ..core.densities import check_density
from ..core.densities import normalize as normalize_density
from ..core.field_forces import ScalingCache, check_solved_heads, field_scalings, field_velocity
from ..core.heads import Head, check_exp_range, check_heads
from ..core.kernels import KERNELS, NORMALIZATIONS
from ..core.sinkhorn import SINKHORN_MAXITER, SINKHORN_TOL
from ..core.sphere import NodeTransforms, SphereGrid, from_real, to_real
from ..core.sums import aggregate, pair_sum
from ..core.zonal import GridSpace, ZonalOperator, truncation_level
from .plans import density_plan

__all__ = ["ContinuumPDE", "KernelResolutionWarning"]


class KernelResolutionWarning(UserWarning):
    """``lmax`` truncates the Funk-Hecke expansion of a head's kernel above the requested tolerance: the first
    neglected potential multiplier, relative to the largest (:func:`meanfield.core.zonal.truncation_level`),
    exceeds ``kernel_tol``."""


@validate.renamed(method="summation")
@dataclass(frozen=True, eq=False)
class ContinuumPDE:
    """Multi-head continuity equation on S^2.

    Parameters
    ----------
    heads : sequence of Head
        Heads of dimension 3.  If every head is zonal (``M = V = lambda I``) the spectral
        Funk-Hecke path is used, otherwise the heads' bi-spherical operators.
    lmax : int
        Spectral truncation degree (>= 2).
    nu : float
        Diffusion coefficient ``nu >= 0`` (token noise).
    kernel_tol : float
        Warn (:class:`KernelResolutionWarning`) when the first neglected Funk-Hecke multiplier
        of a zonal kernel, relative to the largest, exceeds this; raise ``ValueError`` above 1e-2.
        General heads: the tolerance of their operators' degree rule
        (:func:`meanfield.core.bispherical.kernel_degree`, floored at 1e-14; kernels without a rule, ReLU,
        are refused on the operator path: use ``summation="quadrature"``), and the same check of
        ``lmax`` for potential heads (at ``lambda = |M|_2``).
    nthreads : int
        Threads for the spherical-harmonic transforms (1 is fastest below lmax ~ 127).
    chunk_bytes : int
        Work space of the quadrature path.
    summation : {"auto", "spectral", "quadrature"}
        ``"auto"`` and ``"spectral"``: Funk-Hecke multipliers when every head is zonal, else bi-spherical
        operators; ``"quadrature"``: direct sums over the grid nodes (O(nodes^2), the reference).
    sinkhorn_tol : float
        Marginal tolerance of the Sinkhorn scalings ``a(x) int k(<x, y>) a(y) rho(y) dy = 1`` of Sinkhorn
        heads (MODEL.md section 6; solved on the grid, :meth:`scalings` reports the error reached).
    sinkhorn_maxiter : int
        Iteration cap of a scaling; beyond it :class:`meanfield.core.sinkhorn.SinkhornError` names the head.

    Raises
    ------
    ValueError
        Heads that :func:`meanfield.core.heads.check_heads` refuses or of dimension other than 3; ``lmax``
        below 2; a negative ``nu`` or ``kernel_tol``, a non-positive ``chunk_bytes``, ``sinkhorn_tol`` or
        ``sinkhorn_maxiter``; an unknown ``summation``; an exp head with mean or Sinkhorn normalization that
        overflows (:func:`meanfield.core.heads.check_exp_range`); an ``lmax`` whose first neglected
        Funk-Hecke multiplier is above ``1e-2`` of the largest; a general head whose operator degree is above
        the cap at ``kernel_tol`` or whose kernel has no degree rule (use ``summation="quadrature"``).
    TypeError
        The keyword ``method`` of 0.2 (now ``summation``).
    """

    heads: tuple
    lmax: int
    nu: float = 0.0
    kernel_tol: float = 1e-10
    nthreads: int = 1
    chunk_bytes: int = 4 * 2**20        # not CHUNK_BYTES (8 MiB): see its docstring (the bits of the quadrature path)
    summation: str = "auto"
    sinkhorn_tol: float = SINKHORN_TOL
    sinkhorn_maxiter: int = SINKHORN_MAXITER
    grid: SphereGrid = field(init=False)
    zonal: bool = field(init=False)
    operator: ZonalOperator | None = field(init=False)
    general: GeneralOperator | None = field(init=False)

    def __post_init__(self):
        heads = check_heads(self.heads)
        if heads[0].dim != 3:
            raise ValueError(f"heads must have dimension d = 3 (the PDE is on S^2); received d = {heads[0].dim}")
        validate.real("nu", self.nu, 0.0)
        validate.real("kernel_tol", self.kernel_tol, 0.0)
        validate.integer("chunk_bytes", self.chunk_bytes, 1, what="a positive integer")
        validate.real("sinkhorn_tol", self.sinkhorn_tol, 0.0, lo_open=True)
        validate.integer("sinkhorn_maxiter", self.sinkhorn_maxiter, 1)
        check_exp_range(heads)
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        set_("heads", heads)
        set_("grid", SphereGrid.dealiased(self.lmax, nthreads=self.nthreads))
        validate.choice("summation", self.summation, CONTINUUM_SUMMATIONS)
        all_zonal = all(h.is_zonal for h in heads)
        set_("zonal", all_zonal and self.summation != "quadrature")
        set_("general", None)
        if not all_zonal and self.summation != "quadrature":
            tol = max(float(self.kernel_tol), 1e-14)
            L = 2
            for i, h in enumerate(heads):
                Li = kernel_degree(h, tol, where=f"heads[{i}]")
                if Li is None:
                    raise ValueError(f"heads[{i}] needs an operator degree above the cap at kernel_tol = {tol:.0e} "
                                     f"(beta |M|_2 = {h.beta * operator_norm(h):.4g}); use a larger kernel_tol or "
                                     f"summation='quadrature'")
                L = max(L, Li)
            op = GeneralOperator(heads, L, nthreads=self.nthreads, tolerance=tol)
            for i, (h, c) in enumerate(zip(heads, op.scales)):
                if c is not None and operator_norm(h) > 0:      # X = c grad N, N truncated at lmax
                    lam = operator_norm(h)
                    sur = Head(lam * np.eye(3), lam * np.eye(3), beta=h.beta, kernel=h.kernel,
                               kernel_params=dict(h.kernel_params))
                    self._check_tail(h, truncation_level(sur, self.lmax, where=f"heads[{i}]"))
            set_("general", op)
            set_("_transforms", NodeTransforms(self.grid, L))
        check_solved_heads(heads, self.zonal or self.general is not None)
        set_("_scaling_cache", ScalingCache())
        if self.zonal:
            for i, h in enumerate(heads):  # the first neglected potential multiplier (Funk-Hecke)
                self._check_tail(h, truncation_level(h, self.lmax, where=f"heads[{i}]"))
            op = ZonalOperator(heads, self.lmax, l_index=self.grid.l_index)
            set_("operator", op)
            shape = self.grid.shape        # work arrays of tendency()
            set_("_work", dict(rho=np.empty(shape), v=np.empty((2,) + shape), grad=np.empty((2,) + shape),
                               Z=np.empty(shape), alm=np.empty(self.grid.nalm, np.complex128)))
        else:
            set_("operator", None)
        set_("_lap", -self.grid.l_index * (self.grid.l_index + 1.0))
        set_("_nodes", self.grid.nodes.reshape(-1, 3))
        set_("_w", self.grid.weights.reshape(-1))

    def _check_tail(self, head, tail):
        lam = head.scalar if head.is_zonal else f"|M|_2 = {operator_norm(head):.4g}"
        if tail > 1e-2:
            raise ValueError(f"lmax = {self.lmax} is far too small for a {head.kernel} head with lambda = "
                             f"{lam} and beta = {head.beta}: the first neglected Funk-Hecke "
                             f"multiplier is {tail:.1e} of the largest (allowed <= 1e-2)")
        if tail > self.kernel_tol:
            warnings.warn(f"lmax = {self.lmax} truncates the {head.kernel} kernel (lambda = {lam}, "
                          f"beta = {head.beta}): its first neglected Funk-Hecke multiplier (degree lmax + 1) is "
                          f"{tail:.1e} of its largest, above kernel_tol = {self.kernel_tol:.0e}; raise lmax (or "
                          f"kernel_tol) to silence this", KernelResolutionWarning,
                          stacklevel=validate.outside_stacklevel())

    # ------------------------------------------------------------------ state handling
    @property
    def n_state(self) -> int:
        """Length of the real state vector."""
        return 2 * self.grid.nalm

    def state(self, rho_lm):
        """Real state vector (a copy) from coefficients ``rho_lm`` (nalm,).

        Parameters
        ----------
        rho_lm : array_like, shape (nalm,)
            Spherical-harmonic coefficients of the density (complex).

        Returns
        -------
        ndarray, shape (n_state,)
            The real view (:func:`meanfield.core.sphere.to_real`): re and im of each coefficient.

        Raises
        ------
        ValueError
            ``rho_lm`` not of shape ``(nalm,)``.
        """
        return to_real(np.array(self.grid._alm(rho_lm, "rho_lm"), dtype=np.complex128))

    def coefficients(self, y):
        """Coefficients ``rho_lm`` (nalm,) from a real state vector ``y`` (a view; complex or non-numeric ``y``
        refused, NaN and inf passed on: the driver rejects a non-finite stage).

        Parameters
        ----------
        y : ndarray, shape (n_state,)
            A real state vector (re, im pairs of ``rho_lm``).

        Returns
        -------
        ndarray of complex128, shape (nalm,)

        Raises
        ------
        ValueError
            ``y`` None, a string, not of a real numeric dtype, or not of shape ``(n_state,)``.
        """
        a = None if isinstance(y, (str, bytes)) or y is None else np.asarray(y)
        if a is None or a.dtype.kind not in "fiu":
            raise ValueError(f"y must be a real state vector of shape ({self.n_state},) (the re, im pairs of "
                             f"rho_lm) for lmax = {self.lmax}; received {type(y).__name__}"
                             + ("" if a is None else f" of dtype {a.dtype}"))
        if a.shape != (self.n_state,):
            raise ValueError(f"y must have shape ({self.n_state},) for lmax = {self.lmax}; received shape {a.shape}")
        return from_real(a)

    def check_coefficients(self, rho_lm, name="rho_lm"):
        """``rho_lm`` as complex128 (nalm,), checked finite (a named ValueError otherwise).

        Parameters
        ----------
        rho_lm : array_like, shape (nalm,)
            Coefficients to check.
        name : str
            The name the error message gives them.

        Returns
        -------
        ndarray of complex128, shape (nalm,)

        Raises
        ------
        ValueError
            Not numeric, not of shape ``(nalm,)``, or not finite.
        """
        return validate.complex_array(name, rho_lm, (self.grid.nalm,))

    def trajectory_coefficients(self, traj):
        """``rho_lm`` (T, nalm) at every recorded time of a :func:`meanfield.solve_continuum` trajectory.

        Parameters
        ----------
        traj : Trajectory or ndarray, shape (T, n_state)
            A trajectory of this PDE saved with ``save_states=True``, or its states ``traj.y``.

        Returns
        -------
        ndarray of complex128, shape (T, nalm)

        Raises
        ------
        ValueError
            States that are not a 2-d array with ``n_state`` columns (a trajectory without states, or of
            another ``lmax``).
        """
        y = np.asarray(getattr(traj, "y", None) if not isinstance(traj, np.ndarray) else traj, dtype=float)
        if y.ndim != 2 or y.shape[1] != self.n_state:
            raise ValueError(f"traj must be a Trajectory of this PDE (states of shape (T, {self.n_state}), "
                             f"saved with save_states=True); received states of shape {y.shape}")
        return np.array([from_real(row) for row in y], dtype=np.complex128).reshape(-1, self.grid.nalm)

    def density_at(self, rho, points):
        """Density values at unit vectors ``points`` (m, 3) -> (m,), from coefficients ``rho_lm``
        (complex, (nalm,)) or a real state vector (``(n_state,)``, e.g. ``traj.y[k]``).

        Parameters
        ----------
        rho : array_like, shape (nalm,) or (n_state,)
            Complex coefficients, or a real state vector.
        points : array_like, shape (m, 3)
            Unit vectors.

        Returns
        -------
        ndarray, shape (m,)
            The truncated expansion evaluated at ``points``.

        Raises
        ------
        ValueError
            ``points`` not unit vectors of shape ``(m, 3)``, or ``rho`` of neither shape.
        """
        rho = np.asarray(rho)
        if not np.iscomplexobj(rho) and rho.shape == (self.n_state,):
            rho = from_real(rho.astype(float))
        points = validate.unit_vectors("points", points, 3)
        return self.grid.evaluate(self.grid._alm(rho, "rho"), points)

    # ------------------------------------------------------------------ physics
    def fields(self, rho_lm):
        """Density, velocity and per-head potentials/normalizers on the grid.

        Parameters
        ----------
        rho_lm : array_like, shape (nalm,)
            Density coefficients.

        Returns
        -------
        dict
            With ``rho`` (nlat, nlon), ``X`` (2, nlat, nlon) tangent components of the velocity,
            ``N_lm`` list of per-head potential coefficients ``c[K] rho`` (zonal path only), ``D`` (H, nlat, nlon)
            normalizers (1 for mean heads, ``Z`` for softmax, ``1 / a`` for Sinkhorn: ``X_h = U_h / D_h``) and
            ``sinkhorn_error`` (H,) the marginal error of each Sinkhorn head's scaling (NaN for the others).

        Raises
        ------
        ValueError
            ``rho_lm`` not of shape ``(nalm,)``.
        meanfield.core.sinkhorn.SinkhornError
            A Sinkhorn head's scaling not converged within ``sinkhorn_maxiter``.
        """
        g = self.grid
        rho = g.synthesis(rho_lm)
        D = np.ones((len(self.heads),) + g.shape)
        err = np.full(len(self.heads), np.nan)
        if self.zonal:
            rho_lm = g._alm(rho_lm, "rho_lm")
            info = {}
            # head by head (no summed mean potentials): the same arithmetic as before the shared loop
            X = field_velocity(self.heads, self.operator._mult, rho_lm, GridSpace(g), **self._solve_options(rho),
                               details=info)
            for h, (Dh, res) in enumerate(zip(info["D"], info["scalings"])):
                if Dh is not None:
                    D[h] = Dh
                if res is not None:
                    err[h] = res.error
            N_lm = [g.multiply_degree(rho_lm, m["potential"]) for m in self.operator.multipliers]
            return {"rho": rho, "X": X, "N_lm": N_lm, "D": D, "sinkhorn_error": err}
        if self.general is not None:
            info = {}
            rho_lm = g._alm(rho_lm, "rho_lm")          # complex128: the scaling cache's key
            space = self._sources(rho)
            known = self._general_known(rho_lm, space)
            v = self.general.velocity(space, known=known, details=info, tol=self.sinkhorn_tol,
                                      maxiter=self.sinkhorn_maxiter)
            for h, Dh in enumerate(info["D"]):
                if Dh is not None:
                    D[h] = Dh.reshape(g.shape)
                if known[h] is not None:
                    err[h] = known[h].error
            return {"rho": rho, "X": g.from_cartesian(v.reshape(g.shape + (3,))), "N_lm": None, "D": D,
                    "sinkhorn_error": err}
        W = rho.reshape(-1) * self._w
        U = np.zeros_like(self._nodes)
        for h, head in enumerate(self.heads):
            u, nrm = aggregate(head, self._nodes, self._nodes, W, self.chunk_bytes)
            U += u
            D[h] = nrm.reshape(g.shape)
        return {"rho": rho, "X": g.from_cartesian(U.reshape(g.shape + (3,))), "N_lm": None, "D": D,
                "sinkhorn_error": err}

    def _sources(self, rho):
        """The density ``rho`` (nlat, nlon) as the sources of the general heads' operators (a fresh space)."""
        return NodeSources(self._transforms, rho)

    def _general_known(self, rho_lm, space):
        """Per head the Sinkhorn scalings of a general head at this state on the grid nodes (``a`` for the rows, ``b``
        for the columns; ``a = b`` for a symmetric ``M``), None for row-local heads; solved once per state (the last
        state's cache, as the zonal path: the same solve from the same start whatever the history)."""
        solving = [i for i, h in enumerate(self.heads) if not NORMALIZATIONS[h.normalization].row_local]
        if not solving:
            return [None] * len(self.heads)
        known = self._scaling_cache.lookup(np.ascontiguousarray(rho_lm, dtype=np.complex128).tobytes())
        for i in solving:
            if i not in known:
                sums = self.general.head_sums(i, space)
                res = NORMALIZATIONS[self.heads[i].normalization].scalings(
                    sums.apply, sums.shape, apply_t=sums.apply_t, tol=self.sinkhorn_tol, maxiter=self.sinkhorn_maxiter,
                    where=f"heads[{i}]")
                res.a.setflags(write=False)              # shared by every call at this state (views handed out)
                res.b.setflags(write=False)
                known[i] = res
        return [known.get(i) for i in range(len(self.heads))]

    def _solve_options(self, rho):
        return dict(rho=rho, tol=self.sinkhorn_tol, maxiter=self.sinkhorn_maxiter, cache=self._scaling_cache)

    def scalings(self, rho_lm):
        """Per head: the Sinkhorn scaling ``a`` on the grid (a :class:`meanfield.core.sinkhorn.SinkhornResult`,
        ``a`` of shape (nlat, nlon), ``error`` the marginal error ``max |a K[a rho] - 1|`` reached), None for
        heads with a row-local normalization.

        Parameters
        ----------
        rho_lm : array_like, shape (nalm,)
            Density coefficients.

        Returns
        -------
        list of SinkhornResult or None
            One entry per head (all None on the quadrature path).
        """
        g = self.grid
        rho_lm = g._alm(rho_lm, "rho_lm")
        if self.general is not None:
            known = self._general_known(rho_lm, self._sources(g.synthesis(rho_lm)))
            return [None if r is None else replace(r, a=r.a.reshape(g.shape), b=r.b.reshape(g.shape)) for r in known]
        if not self.zonal:
            return [None] * len(self.heads)
        return field_scalings(self.heads, self.operator._mult, rho_lm, GridSpace(g),
                              **self._solve_options(g.synthesis(rho_lm)))

    def attention_entropies(self, rho_lm):
        """Spectral paths: relative attention entropies ``H_h(x) = -int p_h log p_h rho(y) dy`` on the grid, (H, nlat,
        nlon) (:meth:`meanfield.core.zonal.ZonalOperator.entropies`; Sinkhorn heads: ``p = a k a``; general heads:
        ``log Z - Q / Z`` by their operators); NaN for kernels that can vanish.

        Parameters
        ----------
        rho_lm : array_like, shape (nalm,)
            Density coefficients.

        Returns
        -------
        ndarray, shape (H, nlat, nlon)

        Raises
        ------
        ValueError
            On the quadrature path (``summation="quadrature"``), or ``rho_lm`` not of shape ``(nalm,)``.
        """
        g = self.grid
        if self.general is not None:
            rho_lm = g._alm(rho_lm, "rho_lm")
            space = self._sources(g.synthesis(rho_lm))
            known = self._general_known(rho_lm, space)
            H = np.full((len(self.heads),) + g.shape, np.nan)
            for i, h in enumerate(self.heads):
                if KERNELS[h.kernel].positive:
                    sums = self.general.head_sums(i, space)
                    s = None if known[i] is None else known[i].b       # Sinkhorn: p(x, y) = a(x) k b(y)
                    Z = sums.apply(s)
                    Q = self.general.entropy_sums(i, space, s)
                    if s is not None:
                        Q = Q + sums.apply(s * np.log(s))
                    H[i] = (np.log(Z) - Q / Z).reshape(g.shape)
            return H
        if not self.zonal:
            raise ValueError("attention_entropies needs a spectral path (summation 'auto' or 'spectral'); the "
                             "quadrature path sums them by meanfield.core.sums.entropy_rows")
        rho_lm = g._alm(rho_lm, "rho_lm")
        return self.operator.entropies(rho_lm, GridSpace(g), **self._solve_options(g.synthesis(rho_lm)))

    def velocity(self, rho_lm):
        """Velocity ``X[rho]`` at the grid nodes as Cartesian tangent vectors, shape (nlat, nlon, 3).

        Parameters
        ----------
        rho_lm : array_like, shape (nalm,)
            Density coefficients (checked: :meth:`check_coefficients`).

        Returns
        -------
        ndarray, shape (nlat, nlon, 3)

        Raises
        ------
        ValueError
            ``rho_lm`` not finite or not of shape ``(nalm,)``.
        """
        return self.grid.to_cartesian(self.fields(self.check_coefficients(rho_lm))["X"])

    def _zonal_flux(self, rho_lm):
        """``rho X`` on the grid (a work array) for zonal heads: the gradient of the summed mean
        potentials, plus one gradient and one synthesis per softmax head; no other allocation."""
        g, wk = self.grid, self._work
        rho = g.synthesis(rho_lm, out=wk["rho"])
        X = self.operator.velocity(g._alm(rho_lm, "rho_lm"), GridSpace(g, wk), **self._solve_options(rho))
        X *= rho
        return X

    def tendency(self, rho_lm):
        """``d rho_lm / dt = -div(rho X) + nu Lap rho`` as coefficients (nalm,).

        Parameters
        ----------
        rho_lm : ndarray of complex, shape (nalm,)
            Density coefficients.

        Returns
        -------
        ndarray of complex128, shape (nalm,)
        """
        out = self.transport(rho_lm)
        if self.nu:
            out += self.nu * self._lap * rho_lm
        return out

    def rhs(self, t, y):
        """Right-hand side ``rhs(t, y)`` on the real state vector (NaN or inf anywhere in ``y`` gives a NaN
        result, passed on to the driver, which rejects the stage).

        Parameters
        ----------
        t : float
            Time (unused: the equation is autonomous).
        y : ndarray, shape (n_state,)
            Real state vector.

        Returns
        -------
        ndarray, shape (n_state,)
            The real view of :meth:`tendency`.

        Raises
        ------
        ValueError
            ``y`` not a real vector of shape ``(n_state,)`` (:meth:`coefficients`).
        """
        rho_lm = self.coefficients(y)
        out = to_real(self.tendency(rho_lm))
        if not np.isfinite(rho_lm).all():       # one O(nalm) pass: a NaN in an unused slot (im of m = 0) too
            out[...] = np.nan
        return out

    def transport(self, rho_lm):
        """``d rho_lm / dt`` without the diffusion: ``-div(rho X)`` as coefficients (nalm,).

        Parameters
        ----------
        rho_lm : ndarray of complex, shape (nalm,)
            Density coefficients.

        Returns
        -------
        ndarray of complex128, shape (nalm,)
        """
        if self.zonal:
            out = self.grid.divergence(self._zonal_flux(rho_lm))
        else:
            f = self.fields(rho_lm)
            out = self.grid.divergence(f["rho"] * f["X"])
        np.negative(out, out=out)
        return out

    def split(self):
        """``(linear, rhs_nonlinear)`` for split steppers: ``y' = linear * y + rhs_nonlinear(t, y)``.

        Returns
        -------
        linear : ndarray, shape (n_state,)
            The diffusion ``-nu l (l + 1)`` in the real state layout (each coefficient's re and im).
        rhs_nonlinear : callable ``rhs(t, y)``
            The transport ``-div(rho X)`` on the real state vector.
        """
        linear = np.repeat(self.nu * self._lap, 2)

        def rhs_nonlinear(t, y):
            return to_real(self.transport(from_real(np.ascontiguousarray(y))))

        return linear, rhs_nonlinear

    def energies(self, rho_lm):
        """Per-head energies, shape (H,): ``E_h = 1/2 int int K_h(<x, M_h y>) rho(x) rho(y)`` and, for a
        Sinkhorn head, ``E_S = -(1/beta) int log a rho`` (MODEL.md section 6; ``dE_S/dt = int |X|^2 rho``).

        Parameters
        ----------
        rho_lm : array_like, shape (nalm,)
            Density coefficients (checked: :meth:`check_coefficients`).

        Returns
        -------
        ndarray, shape (H,)

        Raises
        ------
        ValueError
            ``rho_lm`` not finite or not of shape ``(nalm,)``.
        """
        g = self.grid
        rho_lm = self.check_coefficients(rho_lm)
        if self.zonal:
            scalings = self.scalings(rho_lm)
            rho = g.synthesis(rho_lm) if any(r is not None for r in scalings) else None
            return np.array([0.5 * g.inner(rho_lm, g.multiply_degree(rho_lm, m["potential"])) if res is None
                             else -g.integrate(np.log(res.a) * rho) / h.beta
                             for h, m, res in zip(self.heads, self.operator.multipliers, scalings)])
        if self.general is not None:
            rho = g.synthesis(rho_lm)
            space = self._sources(rho)
            known = self._general_known(rho_lm, space)
            W = (rho * g.weights).reshape(-1)
            return np.array([self.general.energy(i, space) if known[i] is None else
                             NORMALIZATIONS[h.normalization].energy(h, self.general.head_sums(i, space), known[i], W)
                             for i, h in enumerate(self.heads)])
        W = g.synthesis(rho_lm).reshape(-1) * self._w
        return np.array([pair_sum(h, self._nodes, W, self.chunk_bytes) for h in self.heads])

    def max_speed(self, rho_lm) -> float:
        """Largest speed ``|X|`` on the grid.

        Parameters
        ----------
        rho_lm : array_like, shape (nalm,)
            Density coefficients.

        Returns
        -------
        float
        """
        X = self.fields(rho_lm)["X"]
        return float(np.sqrt((X**2).sum(axis=0)).max())

    def plan(self, start, t_final, *, method=None, step=None, t_eval=None, normalize=False):
        """The driver's arguments for a run from coefficients ``start`` (:class:`~meanfield.core.model.SolvableModel`).

        The start must be finite coefficients of mass 1 (``normalize=True``: scaled to mass 1 instead); then
        :func:`meanfield.models.plans.density_plan`: ``"dopri5"`` by default, tolerances ``rtol = 1e-8``,
        ``atol = 1e-12`` unless given, the CFL step (:meth:`cfl_dt`) of a fixed-step scheme without ``dt``, and the
        diffusion as the linear part (:meth:`split`) of a split scheme.

        Parameters
        ----------
        start : array_like, shape (nalm,)
            Coefficients ``rho_lm`` (named ``rho_lm0`` in errors).
        t_final : float
            End time.
        method : str, Tableau or Stepper, optional
            The scheme.
        step : StepControl, optional
            Step settings.
        t_eval : array_like, optional
            Output times.
        normalize : bool
            Scale the start to mass 1 rather than refusing another mass.

        Returns
        -------
        RunPlan

        Raises
        ------
        ValueError
            ``t_final`` not positive and finite, coefficients that are not a density of mass 1, or a bad step.
        """
        t_final = validate.real("t_final", t_final, positive=True)
        rho = normalize_density(self.grid, start) if normalize else check_density(self.grid, start, "rho_lm0")
        return density_plan(self, self.state(rho), rho, t_final, method=method, step=step, t_eval=t_eval, label="PDE")

    def cfl_dt(self, rho_lm, cfl=0.5, scheme="rk4") -> float:
        r"""A stable fixed step of ``scheme``: ``cfl / (a / I + d / R)``.

        Transport of degree ``lmax`` at speed ``|X|`` has eigenvalues up to ``i a`` with
        ``a = lmax max|X|``, diffusion down to ``-d`` with ``d = nu lmax (lmax + 1)``; ``I`` and ``R``
        are the reaches of the scheme's stability region along the imaginary and the negative real
        axis (:attr:`meanfield.core.tableaux.Tableau.imag_reach`, ``real_reach``; RK4:
        ``2 sqrt 2`` and 2.785).  The regions of the registered schemes contain the triangle
        ``(0, i I, -R)``, so for ``cfl <= 1`` every ``dt (i a' - d')`` with ``a' <= a``, ``d' <= d``
        lies inside.  A split scheme is held to its explicit part's region for transport only: it
        treats the diffusion implicitly or exactly (:func:`meanfield.solve_continuum` hands it
        :meth:`split`'s linear part), so ``d`` is not counted and the step does not depend on
        ``nu lmax^2``.

        Parameters
        ----------
        rho_lm : ndarray, shape (nalm,)
        cfl : float
            Safety factor: positive and finite; at most 1 for the guarantee above.
        scheme : str, Tableau or Stepper
            A ``method`` of :func:`meanfield.core.integrate.integrate`.

        Returns
        -------
        float
            The step ``dt`` (finite but huge, ``cfl / 1e-300``, when both rates vanish).

        Raises
        ------
        ValueError
            An unknown ``scheme``, a non-positive or non-finite ``cfl``, or a scheme whose stability region
            reaches no part of the imaginary axis while ``max|X| > 0`` (:func:`meanfield.core.methods.stable_step`).
        """
        from ..core.methods import stable_step

        speed = self.max_speed(rho_lm)
        return stable_step(self.lmax * speed, self.nu * self.lmax * (self.lmax + 1), scheme, cfl,
                           what=f"at speed max|X| = {speed:.3g}")
