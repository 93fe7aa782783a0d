"""Configuration of the main job: frozen dataclasses, validated from plain dicts or TOML files.

A :class:`RunConfig` holds everything :func:`meanfield.workflow.run.run` needs: zonal heads, the initial
density (a von Mises-Fisher mixture), the PDE and particle settings, the integrator, the outputs
and the seed.  ``RunConfig.from_dict`` checks every key and value; a bad one raises
:class:`ConfigError` (a ``ValueError``) whose message names the dotted key (``heads[1].beta``),
the allowed values and what was received.  Unknown keys are errors.

>>> cfg = RunConfig.from_toml(to_toml(RunConfig().to_dict()))   # round trip of the default
>>> cfg == RunConfig()
True
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ..core import validate
from ..core.choices import SAMPLINGS, W2_METHODS
from ..core.kernels import KERNELS, NORMALIZATIONS
from ..core.methods import METHODS, as_stepper, method_names
from .inputs import load_positions
from .schema import (
    ConfigError,
    Section,
    boolean_check,
    check_keys,
    choice_check,
    config_field,
    field_docs,
    filename_check,
    integer_check,
    optional_check,
    parse_toml,
    read_text_file,
    real_check,
    real_list_check,
    toml_table,
    toml_value,
)

__all__ = ["HeadConfig", "InitialConfig", "PDEConfig", "ParticleConfig", "IntegratorConfig", "OutputConfig",
           "RunConfig", "load_config", "resolve_positions", "to_toml"]


def _config_error(validator, path, v, *args):
    """``validator(path, v, *args)`` with its ValueError raised as :class:`ConfigError`."""
    try:
        return validator(path, v, *args)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def _unit_vectors(path, v):
    if not isinstance(v, (list, tuple)) or len(v) < 1:
        raise ConfigError(f"{path} must be a non-empty list of unit 3-vectors [x, y, z]; received {v!r}")
    out = []
    for i, mu in enumerate(v):
        p = f"{path}[{i}]"
        if not isinstance(mu, (list, tuple)) or len(mu) != 3:
            raise ConfigError(f"{p} must be a unit 3-vector [x, y, z]; received {mu!r}")
        mu = tuple(real_check()(f"{p}[{k}]", x) for k, x in enumerate(mu))
        _config_error(validate.unit_vector, p, list(mu), 3)          # not renormalized
        out.append(mu)
    return tuple(out)


# ---------------------------------------------------------------------------- the sections
def _matrix(path, v):
    """A 3x3 matrix: inline rows ``[[..], [..], [..]]`` or the name of a .npy file (checked when loaded)."""
    if isinstance(v, str):
        return _npy_path(path, v)
    if not (isinstance(v, (list, tuple)) and len(v) == 3 and all(isinstance(r, (list, tuple)) and len(r) == 3
                                                                 for r in v)):
        raise ConfigError(f"{path} must be a 3x3 matrix [[a, b, c], [d, e, f], [g, h, i]] or a .npy file name; "
                          f"received {v!r}")
    return tuple(tuple(real_check()(f"{path}[{i}][{j}]", x) for j, x in enumerate(r)) for i, r in enumerate(v))


def _table(path, v):
    if not isinstance(v, dict):
        raise ConfigError(f"{path} must be a table of kernel parameters (e.g. {{bias = -1.0}}); received {v!r}")
    return dict(v)


@dataclass(frozen=True)
class HeadConfig(Section):
    """A zonal head ``M = V = lam I`` (see :class:`meanfield.core.heads.Head`).

    ``kernel_params`` (a TOML inline table such as ``kernel_params = {bias = -1.0}``) holds the
    kernel's own parameters, validated by its class in :data:`meanfield.core.kernels.KERNELS`; it
    is omitted (``None``) for kernels without parameters.

    Parameters
    ----------
    lam : float
        Head strength lambda (``M = V = lam I``), nonzero, either sign (default 1.0).
    beta : float
        Inverse temperature, ``> 0`` (default 1.0).
    kernel : str
        A name of :data:`meanfield.core.kernels.KERNELS` (default ``"exp"``).
    normalization : str
        A name of :data:`meanfield.core.kernels.NORMALIZATIONS` (default ``"mean"``).
    kernel_params : dict, optional
        Parameters of the kernel (omitted: its defaults).
    M, V : tuple or str, optional
        General head: the 3x3 query-key and value matrices (rows, or a ``.npy`` file name), given together;
        they replace ``lam``.
    """

    _path = "heads[0]"
    lam: float = config_field(real_check(nonzero=True), 1.0, "head strength lambda (M = V = lam I), either sign")
    beta: float = config_field(real_check(0, lo_open=True), 1.0, "inverse temperature")
    kernel: str = config_field(choice_check(KERNELS), "exp", f"kernel profile, one of {list(KERNELS)}")
    normalization: str = config_field(choice_check(NORMALIZATIONS), "mean", f"one of {list(NORMALIZATIONS)}")
    kernel_params: dict | None = config_field(optional_check(_table), None,
                                              "parameters of the kernel (omitted: its defaults)")
    M: tuple | str | None = config_field(optional_check(_matrix), None,
                                         "general head: query-key matrix, 3x3 rows or a .npy file (with V; replaces lam)")
    V: tuple | str | None = config_field(optional_check(_matrix), None,
                                         "general head: value matrix, 3x3 rows or a .npy file (with M; replaces lam)")

    @classmethod
    def from_dict(cls, d, path=None):
        """The validated section of a config table.

        Parameters
        ----------
        d : dict
            The TOML table.
        path : str, optional
            Its dotted key in messages (default ``"heads[0]"``).

        Returns
        -------
        HeadConfig

        Raises
        ------
        ConfigError
            Not a table, an unknown key, a value refused by its check (named), ``M`` without ``V`` (or the
            reverse), ``lam`` with ``M``, or kernel parameters the kernel refuses.
        """
        obj = super().from_dict(d, path)
        path = path or cls._path
        if (obj.M is None) != (obj.V is None):
            raise ConfigError(f"{path}.M and {path}.V must be given together (a general head); received only "
                              f"{'M' if obj.V is None else 'V'}")
        if obj.M is not None and "lam" in d:
            raise ConfigError(f"{path}.lam does not apply to a general head (M and V given); received lam = "
                              f"{d['lam']!r}")
        return obj

    def to_dict(self) -> dict:
        """Plain Python, the inverse of :meth:`from_dict` (``None`` values and, for a general head, ``lam`` left out).

        Returns
        -------
        dict
        """
        out = super().to_dict()
        if self.M is not None:              # lam does not apply (and from_dict refuses it)
            out.pop("lam", None)
        return out

    def _validate(self, path):
        if self.kernel_params is not None:
            try:
                params = KERNELS[self.kernel].check_params(self.kernel_params, f"{path}.kernel_params")
            except ValueError as err:
                raise ConfigError(str(err)) from None
            object.__setattr__(self, "kernel_params", dict(params))

    def head_kwargs(self) -> dict:
        """Keyword arguments of :class:`meanfield.core.heads.Head` besides ``M`` and ``V``.

        Returns
        -------
        dict
            ``beta``, ``kernel``, ``normalization``, ``kernel_params``.
        """
        return {"beta": self.beta, "kernel": self.kernel, "normalization": self.normalization,
                "kernel_params": self.kernel_params}


def _npy_path(path, v):
    if not (isinstance(v, str) and v.strip() and v.isprintable() and v.endswith(".npy")):
        raise ConfigError(f"{path} must be the name of a .npy file (relative to the config file); received {v!r}")
    return v


def _profile(path, v):
    if not isinstance(v, dict) or set(v) not in ({"mu", "rho"}, {"legendre"}):
        raise ConfigError(f"{path} must be a table {{mu = [...], rho = [...]}} (a profile rho(mu), mu from -1 to 1) "
                          f"or {{legendre = [a_0, a_1, ...]}}; received {v!r}")
    return {k: real_list_check(min_len=1)(f"{path}.{k}", x) for k, x in v.items()}


_VMF_KEYS = ("mus", "kappas", "weights", "floor")


@dataclass(frozen=True)
class InitialConfig(Section):
    """Initial density: by default ``(1 - floor) sum_k w_k vMF(mus[k], kappas[k]) + floor / (4 pi)``.

    Instead of the mixture, ``coefficients`` names a ``.npy`` file of spherical-harmonic coefficients
    (any degree; the layout of :mod:`meanfield.core.sphere`, e.g. a finished run's last density), or
    ``profile`` gives a zonal density about the north pole (``{mu = [...], rho = [...]}`` or
    ``{legendre = [...]}``); see :mod:`meanfield.workflow.inputs`.  Both are rescaled to mass 1.

    Parameters
    ----------
    mus : tuple of 3-tuples
        Mean directions, unit 3-vectors.
    kappas : tuple of float
        Concentrations ``>= 0``: one, or one per direction.
    weights : tuple of float, optional
        Mixture weights ``>= 0`` summing to 1 (omitted: equal).
    floor : float
        Uniform fraction, in ``[0, 1]`` (default 0.25).
    coefficients : str, optional
        A ``.npy`` file of spherical-harmonic coefficients (instead of the mixture).
    profile : dict, optional
        A zonal density ``{mu = [...], rho = [...]}`` or ``{legendre = [...]}`` (instead of the mixture).
    """

    _path = "initial"
    mus: tuple = config_field(_unit_vectors, ((0.0, 0.0, 1.0), (1.0, 0.0, 0.0), (0.0, -0.6, -0.8)),
                              "mean directions, unit 3-vectors")
    kappas: tuple = config_field(real_list_check(0.0), (3.0, 2.0, 2.0), "concentrations >= 0 (one, or one per direction)")
    weights: tuple | None = config_field(optional_check(real_list_check(0.0)), None,
                                         "mixture weights >= 0 summing to 1 (omitted: equal)")
    floor: float = config_field(real_check(0.0, 1.0), 0.25, "uniform fraction in [0, 1]")
    coefficients: str | None = config_field(optional_check(_npy_path), None,
                                            "a .npy file of spherical-harmonic coefficients (instead of the mixture)")
    profile: dict | None = config_field(optional_check(_profile), None,
                                        "a zonal density {mu = [...], rho = [...]} or {legendre = [...]} (instead of "
                                        "the mixture)")

    @classmethod
    def from_dict(cls, d, path=None):
        """The validated section of a config table.

        Parameters
        ----------
        d : dict
            The TOML table.
        path : str, optional
            Its dotted key in messages (default ``"initial"``).

        Returns
        -------
        InitialConfig

        Raises
        ------
        ConfigError
            Not a table, an unknown key, a value refused by its check, both ``coefficients`` and ``profile``,
            either of them with mixture keys, or ``kappas`` / ``weights`` of the wrong length (or weights not
            summing to 1).
        """
        obj = super().from_dict(d, path)
        path = path or cls._path
        chosen = [k for k in ("coefficients", "profile") if isinstance(d, dict) and d.get(k) is not None]
        if len(chosen) > 1:
            raise ConfigError(f"{path} takes one of coefficients or profile; received both")
        mixed = [k for k in _VMF_KEYS if k in d]
        if chosen and mixed:
            raise ConfigError(f"{path}.{chosen[0]} replaces the vMF mixture: remove {[f'{path}.{k}' for k in mixed]}; "
                              f"received both")
        return obj

    def to_dict(self) -> dict:
        """Plain Python, the inverse of :meth:`from_dict` (the mixture's keys left out for a file or a profile).

        Returns
        -------
        dict
        """
        out = super().to_dict()
        if self.kind != "vmf":               # the mixture's keys do not apply (and from_dict refuses them)
            for k in _VMF_KEYS:
                out.pop(k, None)
        return out

    @property
    def kind(self) -> str:
        """``"coefficients"``, ``"profile"`` or ``"vmf"``: where the initial density comes from."""
        return "coefficients" if self.coefficients else ("profile" if self.profile else "vmf")

    def _validate(self, path):
        K = len(self.mus)
        if len(self.kappas) not in (1, K):
            raise ConfigError(f"{path}.kappas must have 1 or len({path}.mus) = {K} entries; "
                              f"received {len(self.kappas)}")
        if self.weights is not None:
            if len(self.weights) != K:
                raise ConfigError(f"{path}.weights must have len({path}.mus) = {K} entries; "
                                  f"received {len(self.weights)}")
            _config_error(validate.probability_weights, f"{path}.weights", self.weights, K)


PDE_METHODS = tuple(method_names(stochastic=False))
EXPLICIT_METHODS = tuple(method_names(explicit=True))


@dataclass(frozen=True)
class PDEConfig(Section):
    """Continuum settings (:class:`meanfield.ContinuumPDE`, :func:`meanfield.solve_continuum`).

    Parameters
    ----------
    lmax : int
        Spectral truncation degree, in ``[2, 1023]`` (default 31).
    tail_tol : float
        Stop when the spectral tail exceeds this, ``> 0`` (default 1e-3).
    negative_tol : float
        Stop when the negative mass exceeds this, ``> 0`` (default 1e-4).
    nu : float
        Token noise ``>= 0`` of both the PDE and the particles (``nu > 0`` needs ``integrator.dt``).
    method : str, optional
        The PDE's time stepper, a deterministic name of :data:`meanfield.core.methods.METHODS`; unset:
        ``integrator.method``.
    """

    _path = "pde"
    lmax: int = config_field(integer_check(2, 1023), 31, "spectral truncation degree")
    tail_tol: float = config_field(real_check(0, lo_open=True), 1e-3, "stop when the spectral tail exceeds this")
    negative_tol: float = config_field(real_check(0, lo_open=True), 1e-4, "stop when the negative mass exceeds this")
    nu: float = config_field(real_check(0), 0.0, "token noise nu >= 0 of both the PDE and the particles (nu > 0 needs "
                             "integrator.dt, the particles' fixed step)")
    method: str | None = config_field(optional_check(choice_check(PDE_METHODS)), None,
                                      f"the PDE's time stepper, one of {list(PDE_METHODS)}; unset: integrator.method. "
                                      f"The split schemes treat nu * Laplacian exactly or implicitly, so their stable "
                                      f"step does not shrink like 1/(nu lmax^2): lawson_dopri5 is adaptive (uses the "
                                      f"integrator's rtol/atol), the others take integrator.dt")


@dataclass(frozen=True)
class ParticleConfig(Section):
    """Particle settings: ``n`` tokens sampled from the initial density.

    Parameters
    ----------
    n : int
        Number of tokens, in ``[2, 10^6]`` (default 1000; None when taken from ``positions``).
    sampling : str
        Sampling of the start, a name of :data:`meanfield.core.choices.SAMPLINGS` (default ``"iid"``).
    nu : float, optional
        Token noise; must equal ``pde.nu`` when given.
    positions : str, optional
        A ``.npy`` file of initial tokens (n, 3) instead of sampling.
    """

    _path = "particles"
    n: int = config_field(integer_check(2, 10**6), 1000, "number of tokens")
    sampling: str = config_field(choice_check(SAMPLINGS), "iid", f"sampling of the start, one of {list(SAMPLINGS)}")
    nu: float | None = config_field(optional_check(real_check(0)), None,
                                    "token noise; must equal pde.nu when given (one noise)")
    positions: str | None = config_field(optional_check(_npy_path), None,
                                         "a .npy file of initial tokens (n, 3) instead of sampling (n: from the file)")

    @classmethod
    def from_dict(cls, d, path=None):
        """The validated section of a config table.

        Parameters
        ----------
        d : dict
            The TOML table.
        path : str, optional
            Its dotted key in messages (default ``"particles"``).

        Returns
        -------
        ParticleConfig
            ``n`` None when ``positions`` is given without it.

        Raises
        ------
        ConfigError
            Not a table, an unknown key, a value refused by its check, or ``sampling`` with ``positions``.
        """
        obj = super().from_dict(d, path)
        path = path or cls._path
        if obj.positions is not None:
            if "sampling" in d:
                raise ConfigError(f"{path}.positions gives the tokens, so {path}.sampling does not apply: remove "
                                  f"it; received both")
            if "n" not in d:                 # taken from the file (resolve_positions)
                obj = replace(obj, n=None)
        return obj

    def to_dict(self) -> dict:
        """Plain Python, the inverse of :meth:`from_dict` (``sampling`` left out with ``positions``).

        Returns
        -------
        dict
        """
        out = super().to_dict()
        if self.positions is not None:       # sampling does not apply (and from_dict refuses it)
            out.pop("sampling", None)
        return out


@dataclass(frozen=True)
class IntegratorConfig(Section):
    """Time stepping shared by both runs (:func:`meanfield.core.integrate.integrate`).

    Parameters
    ----------
    t_final : float
        Final time, ``> 0`` (default 1.2).
    n_frames : int
        Number of recorded times in ``[0, t_final]``, in ``[2, 10^4]`` (default 25).
    method : str
        An explicit scheme of :data:`meanfield.core.methods.METHODS` (default ``"dopri5"``).
    rtol, atol : float
        Tolerances of adaptive schemes, ``> 0`` (defaults 1e-7, 1e-10).
    dt : float, optional
        Step size, ``> 0`` (required for fixed-step schemes).
    """

    _path = "integrator"
    t_final: float = config_field(real_check(0, lo_open=True), 1.2, "final time")
    n_frames: int = config_field(integer_check(2, 10**4), 25, "number of recorded times in [0, t_final]")
    method: str = config_field(choice_check(EXPLICIT_METHODS), "dopri5", f"scheme, one of {list(EXPLICIT_METHODS)} (with "
                               f"pde.nu > 0 the particles use the SDE scheme geodesic_strang, the PDE this one)")
    rtol: float = config_field(real_check(0, lo_open=True), 1e-7, "relative tolerance (adaptive schemes)")
    atol: float = config_field(real_check(0, lo_open=True), 1e-10, "absolute tolerance (adaptive schemes)")
    dt: float | None = config_field(optional_check(real_check(0, lo_open=True)), None,
                                    "step size (required for fixed-step schemes)")

    def _validate(self, path):
        if not METHODS[self.method].adaptive and self.dt is None:
            raise ConfigError(f"{path}.dt must be a number > 0 for the fixed-step method {self.method!r}; "
                              f"received no value")


@dataclass(frozen=True)
class OutputConfig(Section):
    """What the main job writes into its output folder.

    Parameters
    ----------
    dataset : str
        NetCDF file name, a plain name ending in ``.nc`` (default ``"result.nc"``).
    figures : bool
        Write the PNG figures (default True).
    animation : bool
        Write the GIF animation (default True).
    dpi : int
        Figure resolution, in ``[30, 600]`` (default 110).
    w2_method : str
        A name of :data:`meanfield.core.choices.W2_METHODS` (default ``"auto"``).
    checkpoint_every : float, optional
        Save integrator states every this much simulated time, ``> 0`` (always on Ctrl-C).
    """

    _path = "outputs"
    dataset: str = config_field(filename_check, "result.nc", "NetCDF file name")
    figures: bool = config_field(boolean_check, True, "write the PNG figures")
    animation: bool = config_field(boolean_check, True, "write the GIF animation")
    dpi: int = config_field(integer_check(30, 600), 110, "figure resolution")
    w2_method: str = config_field(choice_check(W2_METHODS), "auto",
                                  f"W2 method, one of {list(W2_METHODS)} (auto: exact while n * nodes <= 8000^2, "
                                  f"else semidiscrete, against the continuous density)")
    checkpoint_every: float | None = config_field(optional_check(real_check(0, lo_open=True)), None,
                                                  "save integrator states every this much simulated time "
                                                  "(always on Ctrl-C)")


_SECTIONS = {"initial": InitialConfig, "pde": PDEConfig, "particles": ParticleConfig,
             "integrator": IntegratorConfig, "outputs": OutputConfig}


@dataclass(frozen=True)
class RunConfig:
    """Everything the main job needs; ``RunConfig()`` is the built-in default run.

    Parameters
    ----------
    heads : tuple of HeadConfig
        Non-empty (default two zonal heads, ``lam = 1`` and ``0.5``).
    initial : InitialConfig
    pde : PDEConfig
    particles : ParticleConfig
    integrator : IntegratorConfig
    outputs : OutputConfig
    seed : int
        Seed of the particle sampling, in ``[0, 2^63 - 1]`` (default 0).
    """

    heads: tuple = (HeadConfig(lam=1.0), HeadConfig(lam=0.5))
    initial: InitialConfig = InitialConfig()
    pde: PDEConfig = PDEConfig()
    particles: ParticleConfig = ParticleConfig()
    integrator: IntegratorConfig = IntegratorConfig()
    outputs: OutputConfig = OutputConfig()
    seed: int = 0

    def to_dict(self) -> dict:
        """Plain Python (dicts, lists, numbers, strings), the inverse of :meth:`from_dict`.

        Returns
        -------
        dict
        """
        out = {"seed": self.seed, "heads": [h.to_dict() for h in self.heads]}
        out.update({k: getattr(self, k).to_dict() for k in _SECTIONS})
        return out

    @classmethod
    def from_dict(cls, d) -> "RunConfig":
        """Validated config; missing keys take the defaults, unknown keys raise :class:`ConfigError`.

        Parameters
        ----------
        d : dict
            The config as parsed TOML.

        Returns
        -------
        RunConfig

        Raises
        ------
        ConfigError
            Not a table, an unknown key, a section or head refused, an empty ``heads``, ``particles.nu``
            different from ``pde.nu``, or no ``integrator.dt`` where noise or a fixed-step PDE method needs one.
        """
        check_keys(d, ["seed", "heads", *_SECTIONS])
        kw = {k: sec.from_dict(d[k], k) for k, sec in _SECTIONS.items() if k in d}
        if "seed" in d:
            kw["seed"] = integer_check(0, 2**63 - 1)("seed", d["seed"])
        if "heads" in d:
            heads = d["heads"]
            if not isinstance(heads, list) or not heads:
                raise ConfigError(f"heads must be a non-empty list of tables ([[heads]] in TOML); received {heads!r}")
            kw["heads"] = tuple(HeadConfig.from_dict(h, f"heads[{i}]") for i, h in enumerate(heads))
        pde, particles = kw.get("pde", PDEConfig()), kw.get("particles", ParticleConfig())
        if particles.nu is not None and particles.nu != pde.nu:
            raise ConfigError(f"particles.nu must equal pde.nu = {pde.nu!r} (the particles' mean-field limit is "
                              f"the PDE with the same noise); received {particles.nu!r}")
        integ = kw.get("integrator", IntegratorConfig())
        if pde.nu > 0 and integ.dt is None:
            raise ConfigError(f"integrator.dt must be a number > 0 when pde.nu = {pde.nu!r} > 0 (the noisy "
                              f"particles take fixed steps); received no value")
        if pde.method is not None and integ.dt is None and not as_stepper(pde.method).adaptive:
            raise ConfigError(f"integrator.dt must be a number > 0 for the fixed-step PDE method pde.method = "
                              f"{pde.method!r}; received no value")
        return cls(**kw)

    @classmethod
    def from_toml(cls, text: str) -> "RunConfig":
        """The validated config of TOML text (file names not resolved: :func:`load_config` does that).

        Parameters
        ----------
        text : str
            TOML.

        Returns
        -------
        RunConfig

        Raises
        ------
        ConfigError
            Invalid TOML or what :meth:`from_dict` refuses.
        """
        return cls.from_dict(parse_toml(text))

    def to_toml(self, all_keys=False) -> str:
        """TOML text of the config; ``all_keys``: also list the keys without a value (commented out).

        Parameters
        ----------
        all_keys : bool
            List every key of each section.

        Returns
        -------
        str
        """
        return to_toml(self.to_dict(), all_keys=all_keys)


def load_config(path) -> RunConfig:
    """Read and validate a TOML config file; a missing or unreadable file raises :class:`ConfigError`.

    File names in it (``initial.coefficients``, ``particles.positions``, ``heads[i].M`` / ``.V``) are made absolute,
    relative to the file's folder; ``particles.n`` is taken from a positions file (:func:`resolve_positions`).

    Parameters
    ----------
    path : str or path-like
        The TOML file.

    Returns
    -------
    RunConfig

    Raises
    ------
    ConfigError
        A missing or unreadable file, invalid TOML, an invalid config (the message starts with the file), or
        a positions file :func:`resolve_positions` refuses.
    """
    path = Path(path)
    text = read_text_file(path, "config")
    try:
        config = RunConfig.from_toml(text)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None
    return resolve_positions(_resolve_files(config, path.parent), str(path))


def resolve_positions(config, where=None):
    """``particles.n`` taken from (or checked against) the ``particles.positions`` file, if one is given.

    A missing or unusable file, or tokens that are not unit vectors in R^3, or an ``n`` that differs
    from the file's, raise :class:`ConfigError` naming ``particles.positions`` / ``particles.n``.

    Parameters
    ----------
    config : RunConfig
        A validated config.
    where : str, optional
        Prefix of the messages (the config file).

    Returns
    -------
    RunConfig
        ``config`` itself without a positions file, else a copy with ``particles.n`` set.

    Raises
    ------
    ConfigError
        As above.
    """
    if config.particles.positions is None:
        return config
    prefix = "" if where is None else f"{where}: "
    try:
        X0 = load_positions(config.particles.positions, "particles.positions")
    except ValueError as err:
        raise ConfigError(f"{prefix}{err}") from None
    n = config.particles.n
    if n is not None and n != X0.shape[0]:
        raise ConfigError(f"{prefix}particles.n must equal the number of tokens in particles.positions "
                          f"({X0.shape[0]}), or be omitted; received {n}")
    return replace(config, particles=replace(config.particles, n=int(X0.shape[0])))


def _resolve_files(config: "RunConfig", folder) -> "RunConfig":
    """File names in a config (``initial.coefficients``, ``heads[i].M`` / ``.V``) made absolute, relative to
    ``folder``."""
    def absolute(name):
        return name if not isinstance(name, str) or Path(name).is_absolute() else str((Path(folder) / name).resolve())

    if config.initial.coefficients is not None:
        config = replace(config, initial=replace(config.initial, coefficients=absolute(config.initial.coefficients)))
    if config.particles.positions is not None:
        config = replace(config, particles=replace(config.particles, positions=absolute(config.particles.positions)))
    if any(isinstance(h.M, str) or isinstance(h.V, str) for h in config.heads):
        config = replace(config, heads=tuple(replace(h, M=absolute(h.M), V=absolute(h.V)) for h in config.heads))
    return config


# ---------------------------------------------------------------------------- TOML writer
def to_toml(d: dict, all_keys=False) -> str:
    """TOML text of a config dict (scalars, lists, tables, lists of tables), with key descriptions.

    ``None`` values are left out (TOML has no null; absent keys take their defaults); with
    ``all_keys`` every key of a section is listed, those without a value as a comment
    (``# weights = ...    # description``), so that the text names every key a config can set.

    Parameters
    ----------
    d : dict
        A config dict (:meth:`RunConfig.to_dict`).
    all_keys : bool
        List every key of each section.

    Returns
    -------
    str

    Raises
    ------
    TypeError
        A value of a type TOML cannot hold.
    """
    classes = {"heads": HeadConfig, **_SECTIONS}
    lines = ["# meanfield run configuration (meanfield run CONFIG.toml); omitted keys take the defaults", ""]
    scalars = {k: v for k, v in d.items() if not isinstance(v, (dict, list)) or (isinstance(v, list) and v
                                                                                  and not isinstance(v[0], dict))}
    for k, v in scalars.items():
        if v is not None:
            lines.append(f"{k} = {toml_value(v)}" + ("    # seed of the particle sampling" if k == "seed" else ""))
    for k, v in d.items():
        if k in scalars:
            continue
        docs = field_docs(classes.get(k))
        tables = v if isinstance(v, list) else [v]
        for table in tables:
            lines += ["", *toml_table(k, table, classes.get(k), array=isinstance(v, list))]
            if all_keys:
                for key, doc in docs.items():
                    if table.get(key) is None:
                        lines.append(f"# {key} = ...    # {doc}")
    return "\n".join(lines) + "\n"

