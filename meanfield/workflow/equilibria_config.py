"""Configuration of ``meanfield equilibria``: frozen dataclasses, validated from plain dicts or TOML.

An :class:`EquilibriaConfig` names the zonal heads (``[[heads]]``: ``lam`` of either sign, ``beta``,
``kernel``, ``normalization``; or general heads, ``M`` and ``V`` with mean normalization and ``V = c M``, on
``geometry.d = "sphere"`` with parameter ``nu``: :mod:`meanfield.workflow.equilibria_general`), the geometry (``[geometry]``: ``d``, the sphere ``S^{d-1}`` of the
axisymmetric PDE, ``d = 2`` the circle; ``lmax``), the continuation (``[continuation]``: the parameter
``"nu"`` over ``nu_range`` or ``"beta"`` over ``beta_range`` at a fixed ``nu``, the branch ``degrees``
switched at the uniform state's branch points and their ``sides``, the arclength ``step``,
``max_points`` per branch, ``n_eigenvalues`` kept) and the outputs (``[outputs]``).  As for
:class:`~meanfield.workflow.config.RunConfig`, a bad key or value raises
:class:`~meanfield.workflow.config.ConfigError` naming the dotted key; unknown keys are errors.

>>> cfg = EquilibriaConfig.from_toml(EquilibriaConfig().to_toml())     # round trip of the default
>>> cfg == EquilibriaConfig()
True
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .config import HeadConfig
from .schema import (
    ConfigError,
    Section,
    boolean_check,
    check_keys,
    config_field,
    filename_check,
    integer_check,
    parse_toml,
    read_text_file,
    real_check,
    toml_table,
    unique_list,
)

__all__ = ["GeometryConfig", "ContinuationConfig", "EquilibriaOutputConfig", "EquilibriaConfig",
           "load_equilibria_config", "DEFAULT_BETA", "PARAMETERS"]

PARAMETERS = ("nu", "beta")
"""``continuation.parameter``: the noise (the heads' ``beta`` fixed) or every head's ``beta`` (``nu`` fixed)."""

DEFAULT_BETA = 3.6323090508717675
"""``2 beta_*^(3)`` (``beta_*^(3)`` the root of ``I_{5/2} / I_{3/2} = 1/3``, 1.8161545254358837): the
default job's head sits in the discontinuous regime, with a fold and a Maxwell point."""


def _range(lo_open=True):
    def check(path, v):
        if not isinstance(v, (list, tuple)) or len(v) != 2:
            raise ConfigError(f"{path} must be a list [low, high] of two numbers; received {v!r}")
        lo, hi = (real_check(0.0, lo_open=lo_open)(f"{path}[{i}]", x) for i, x in enumerate(v))
        if not lo < hi:
            raise ConfigError(f"{path} must have low < high; received {list(v)!r}")
        return (lo, hi)
    return check


def _int_list(lo, hi=None):
    item = integer_check(lo, hi)

    def check(path, v):
        return unique_list(path, v, item)
    return check


def _sides(path, v):
    if not isinstance(v, (list, tuple)) or not v or any(x not in (1, -1) or isinstance(x, bool) for x in v) \
            or len(set(v)) != len(v):
        raise ConfigError(f"{path} must be [1], [-1] or [1, -1] (the sign of the branch's amplitude b_l); "
                          f"received {v!r}")
    return tuple(int(x) for x in v)


def _dimension(path, v):
    if v == "sphere":
        return v
    if isinstance(v, str):
        raise ConfigError(f"{path} must be an integer d >= 2 (axisymmetric states on S^(d-1)) or \"sphere\" (S^2, "
                          f"every state also solved on the full sphere); received {v!r}")
    return integer_check(2, 4096)(path, v)


@dataclass(frozen=True)
class GeometryConfig(Section):
    """The axisymmetric PDE (:class:`meanfield.AxisymmetricPDE`): densities of ``t = <x, e>`` on ``S^{d-1}``.

    Parameters
    ----------
    d : int or str
        The dimension of ``R^d``, in ``[2, 4096]`` (2: even densities on the circle), or ``"sphere"`` (S^2, every
        state also solved on the full sphere) (default 3).
    lmax : int
        Largest degree of the discretization, in ``[4, 512]`` (default 32).
    """

    _path = "geometry"
    d: int | str = config_field(_dimension, 3, "dimension of R^d: states on S^(d-1) (d = 2: even densities on the circle); "
                                "\"sphere\": S^2, each state also solved and its stability decided on the full sphere")
    lmax: int = config_field(integer_check(4, 512), 32, "largest degree of the discretization (Gegenbauer; on S^2 also the "
                             "spherical harmonics')")

    @property
    def sphere(self) -> bool:
        """Whether the states are also solved on the full sphere (``d = "sphere"``)."""
        return self.d == "sphere"

    @property
    def dim(self) -> int:
        """The dimension ``d`` of ``R^d`` (3 for ``"sphere"``)."""
        return 3 if self.sphere else self.d


@dataclass(frozen=True)
class ContinuationConfig(Section):
    """The branches: the uniform state continued in the parameter, and the branches switched at its
    branch points of the given degrees (pseudo-arclength, :mod:`meanfield.analysis.continuation`).

    Parameters
    ----------
    parameter : str
        ``"nu"`` or ``"beta"`` (:data:`PARAMETERS`; default ``"nu"``).
    nu_range : tuple of float
        ``(nu_min, nu_max)``, ``0 < nu_min < nu_max`` (parameter nu; default ``(0.6, 1.6)``).
    beta_range : tuple of float, optional
        ``(beta_min, beta_max)`` of every head's beta (parameter beta only).
    nu : float, optional
        The fixed noise, ``> 0`` (parameter beta only).
    degrees : tuple of int
        Distinct degrees ``l >= 1`` of the branches switched at the uniform state (default ``(1,)``).
    sides : tuple of int
        Signs of the amplitude ``b_l`` followed: ``(1,)``, ``(-1,)`` or ``(1, -1)`` (default ``(1,)``).
    step : float
        Largest arclength step, ``> 0`` (default 0.05).
    max_points : int
        Largest number of points per branch, in ``[3, 100000]`` (default 400).
    n_eigenvalues : int
        Leading eigenvalues kept per state, in ``[1, 64]`` (default 4).
    """

    _path = "continuation"
    parameter: str = config_field(lambda p, v: _choice_of(p, v), "nu",
                                  f"the continuation parameter, one of {list(PARAMETERS)}")
    nu_range: tuple = config_field(_range(), (0.6, 1.6), "[nu_min, nu_max] (parameter nu)")
    beta_range: tuple | None = config_field(lambda p, v: None if v is None else _range()(p, v), None,
                                            "[beta_min, beta_max] of every head's beta (parameter beta; the heads then "
                                            "give no beta)")
    nu: float | None = config_field(lambda p, v: None if v is None else real_check(0.0, lo_open=True)(p, v), None,
                                    "the fixed noise (parameter beta)")
    degrees: tuple = config_field(_int_list(1), (1,), "degrees l of the branches switched at the uniform state")
    sides: tuple = config_field(_sides, (1,), "signs of the amplitude b_l followed from each branch point ([1, -1]: both)")
    step: float = config_field(real_check(0.0, lo_open=True), 0.05, "largest arclength step (parameter and coefficients)")
    max_points: int = config_field(integer_check(3, 100000), 400, "largest number of points per branch")
    n_eigenvalues: int = config_field(integer_check(1, 64), 4, "leading eigenvalues kept per state")

    def _validate(self, path):
        if self.parameter == "beta" and (self.beta_range is None or self.nu is None):
            raise ConfigError(f"{path}.parameter = \"beta\" needs {path}.beta_range = [low, high] and {path}.nu; "
                              f"received beta_range = {self.beta_range!r}, nu = {self.nu!r}")
        if self.parameter == "nu" and (self.beta_range is not None or self.nu is not None):
            raise ConfigError(f"{path}.beta_range and {path}.nu apply to parameter = \"beta\" only; received "
                              f"them with parameter = \"nu\"")

    @property
    def range(self) -> tuple:
        return self.nu_range if self.parameter == "nu" else self.beta_range


def _choice_of(path, v):
    if v not in PARAMETERS:
        raise ConfigError(f"{path} must be one of {list(PARAMETERS)}; received {v!r}")
    return v


@dataclass(frozen=True)
class EquilibriaOutputConfig(Section):
    """What ``meanfield equilibria`` writes into its output folder.

    Parameters
    ----------
    dataset : str
        NetCDF file name, a plain name ending in ``.nc`` (default ``"equilibria.nc"``).
    figures : bool
        Write the bifurcation figure (default True).
    dpi : int
        Figure resolution, in ``[30, 600]`` (default 110).
    """

    _path = "outputs"
    dataset: str = config_field(filename_check, "equilibria.nc", "NetCDF file name")
    figures: bool = config_field(boolean_check, True, "write the bifurcation figure (bifurcation.png)")
    dpi: int = config_field(integer_check(30, 600), 110, "figure resolution")


_SECTIONS = {"geometry": GeometryConfig, "continuation": ContinuationConfig, "outputs": EquilibriaOutputConfig}


@dataclass(frozen=True)
class EquilibriaConfig:
    """Everything ``meanfield equilibria`` needs; ``EquilibriaConfig()`` is the built-in default (one mean exp
    head of strength 1 on S^2 at ``beta = 2 beta_*^(3)``: a discontinuous transition).

    Parameters
    ----------
    heads : tuple of HeadConfig
        Non-empty (default one zonal mean exp head, ``lam = 1``, ``beta =`` :data:`DEFAULT_BETA`).
    geometry : GeometryConfig
    continuation : ContinuationConfig
    outputs : EquilibriaOutputConfig
    """

    heads: tuple = (HeadConfig(lam=1.0, beta=DEFAULT_BETA),)
    geometry: GeometryConfig = GeometryConfig()
    continuation: ContinuationConfig = ContinuationConfig()
    outputs: EquilibriaOutputConfig = EquilibriaOutputConfig()

    @property
    def general(self) -> bool:
        """Whether a head is general (``M``, ``V`` given): the states are followed on the full sphere
        (:mod:`meanfield.workflow.equilibria_general`)."""
        return any(h.M is not None for h in self.heads)

    def to_dict(self) -> dict:
        """Plain Python, the inverse of :meth:`from_dict` (the heads' ``beta`` left out for parameter beta, and
        ``continuation.degrees`` for general heads: :meth:`from_dict` refuses them there).

        Returns
        -------
        dict
        """
        heads = [h.to_dict() for h in self.heads]
        if self.continuation.parameter == "beta":       # the parameter sets every head's beta
            for h in heads:
                h.pop("beta", None)
        out = {"heads": heads, **{k: getattr(self, k).to_dict() for k in _SECTIONS}}
        if self.general:                                # no branch leaves the uniform state: no degrees
            out["continuation"].pop("degrees", None)
        return out

    @classmethod
    def from_dict(cls, d) -> "EquilibriaConfig":
        """Validated config; missing keys take the defaults, unknown keys raise :class:`ConfigError`.

        Parameters
        ----------
        d : dict
            The config as parsed TOML.

        Returns
        -------
        EquilibriaConfig

        Raises
        ------
        ConfigError
            Not a table, an unknown key, a section or head refused (named by its dotted key), an empty ``heads``,
            a head's ``beta`` with parameter beta, or a general head without ``geometry.d = "sphere"`` and
            parameter nu, or with ``continuation.degrees``.
        """
        check_keys(d, ["heads", *_SECTIONS])
        kw = {k: sec.from_dict(d[k], k) for k, sec in _SECTIONS.items() if k in d}
        cont = kw.get("continuation", ContinuationConfig())
        if "heads" in d:
            heads = d["heads"]
            if not isinstance(heads, list) or not heads:
                raise ConfigError(f"heads must be a non-empty list of tables ([[heads]] in TOML); received {heads!r}")
            parsed = []
            for i, h in enumerate(heads):
                head = HeadConfig.from_dict(h, f"heads[{i}]")
                if head.M is not None:
                    _general_ok(d, kw, i)
                if cont.parameter == "beta":
                    if "beta" in h:
                        raise ConfigError(f"heads[{i}].beta must be left out with continuation.parameter = \"beta\" "
                                          f"(the parameter is every head's beta); received beta = {h['beta']!r}")
                    head = replace(head, beta=cont.beta_range[1])
                parsed.append(head)
            kw["heads"] = tuple(parsed)
        elif cont.parameter == "beta":
            kw["heads"] = tuple(replace(h, beta=cont.beta_range[1]) for h in cls.heads)
        return cls(**kw)

    @classmethod
    def from_toml(cls, text: str) -> "EquilibriaConfig":
        """The validated config of TOML text.

        Parameters
        ----------
        text : str
            TOML.

        Returns
        -------
        EquilibriaConfig

        Raises
        ------
        ConfigError
            Invalid TOML or what :meth:`from_dict` refuses.
        """
        return cls.from_dict(parse_toml(text))

    def to_toml(self) -> str:
        """TOML text of the config, each key with its description (the inverse of :meth:`from_toml`).

        Returns
        -------
        str
        """
        lines = ["# meanfield equilibria configuration (meanfield equilibria CONFIG.toml); omitted keys take "
                 "the defaults"]
        d = self.to_dict()
        tables = [("heads", HeadConfig, h) for h in d["heads"]] + [(k, _SECTIONS[k], d[k]) for k in _SECTIONS]
        for name, cls, table in tables:
            lines += ["", *toml_table(name, table, cls, array=name == "heads")]
        return "\n".join(lines) + "\n"


def _general_ok(d, kw, i):
    """A general head ``heads[i]`` needs ``geometry.d = "sphere"``, parameter ``nu`` and no ``degrees``."""
    geo, cont = kw.get("geometry", GeometryConfig()), kw.get("continuation", ContinuationConfig())
    if not geo.sphere:
        raise ConfigError(f"heads[{i}].M and heads[{i}].V (a general head) need geometry.d = \"sphere\" (its states "
                          f"are not axisymmetric: they are followed on the full sphere); received geometry.d = "
                          f"{geo.d!r}")
    if cont.parameter != "nu":
        raise ConfigError(f"heads[{i}].M and heads[{i}].V (a general head) need continuation.parameter = \"nu\"; "
                          f"received {cont.parameter!r}")
    if "degrees" in (d.get("continuation") or {}):
        raise ConfigError(f"continuation.degrees does not apply with general heads (heads[{i}]): the uniform state "
                          f"is not stationary, the job follows the primary branch and switches at its branch points; "
                          f"received degrees = {d['continuation']['degrees']!r}")


def load_equilibria_config(path) -> EquilibriaConfig:
    """Read and validate a TOML file (:meth:`EquilibriaConfig.from_toml`).

    Parameters
    ----------
    path : str or path-like
        The TOML file.

    Returns
    -------
    EquilibriaConfig

    Raises
    ------
    ConfigError
        A missing or unreadable file, invalid TOML, or an invalid config (the message starts with the file).
    """
    text = read_text_file(path, "config")
    try:
        return EquilibriaConfig.from_toml(text)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None

