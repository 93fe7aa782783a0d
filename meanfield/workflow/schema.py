"""The one schema of every config file: sections of checked fields, TOML in and out, errors that name the key.

A section is a frozen dataclass deriving from :class:`Section` whose fields are declared with :func:`config_field`
(a checker, a default and a one-line description).  ``Section.from_dict(table, path)`` refuses a table that is
not one and every unknown key (naming it and the allowed keys), runs each field's checker on its dotted key
(``heads[1].beta``, ``phase_diagram.n``) and builds the section; a refused value raises :class:`ConfigError` (a
``ValueError``) whose message names the key, the allowed values and what was received.  ``to_dict`` is its
inverse, and :func:`toml_table` writes a section back as TOML with each key's description.

The checkers are made by :func:`real_check`, :func:`integer_check`, :func:`choice_check`, :func:`real_list_check`
and :func:`optional_check` (or are :func:`boolean_check`, :func:`filename_check`, :func:`unique_list`): each is
``check(path, value) -> value`` in its canonical type, the validators of :mod:`meanfield.core.validate` with the
dotted key as the name.  The configs built on it: :class:`~meanfield.workflow.config.RunConfig` (``meanfield run``),
:class:`~meanfield.workflow.equilibria_config.EquilibriaConfig` (``meanfield equilibria``),
:class:`~meanfield.workflow.phase_diagram.PhaseDiagramConfig` (``meanfield phase-diagram``) and
:class:`~meanfield.workflow.transition_map.TransitionMapConfig` (``meanfield equilibria --map``).

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Grid(Section):
...     _path = "grid"
...     n: int = config_field(integer_check(2), 8, "points per axis")
>>> Grid.from_dict({"n": 16})
Grid(n=16)
>>> Grid.from_dict({"m": 1})
Traceback (most recent call last):
    ...
meanfield.workflow.schema.ConfigError: unknown key grid.m; allowed keys in grid: ['n']
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import MISSING, field, fields
from pathlib import Path

from ..core import validate

__all__ = ["ConfigError", "Section", "config_field", "real_check", "integer_check", "choice_check", "boolean_check",
           "optional_check", "real_list_check", "unique_list", "filename_check", "check_keys", "parse_toml",
           "read_text_file", "read_toml_file", "toml_value", "toml_table", "field_docs"]


class ConfigError(ValueError):
    """A configuration value or file is invalid; the message names the key."""


# ---------------------------------------------------------------------------- value checkers
# Each returns a checker ``check(path, value)``: the validators of meanfield.core.validate, with the
# dotted key as the name and their ValueError raised as ConfigError.
def _config_error(validator, path, v, *args, **kw):
    try:
        return validator(path, v, *args, **kw)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def real_check(lo=-math.inf, hi=math.inf, lo_open=False, nonzero=False, what=None):
    """A checker of a finite real number within ``[lo, hi]`` (``lo`` excluded with ``lo_open``).

    Parameters
    ----------
    lo, hi : float
        Bounds (infinite: none).
    lo_open : bool
        Exclude ``lo``.
    nonzero : bool
        Refuse 0.
    what : str, optional
        The allowed values in the message (default: from the bounds, ``"a finite number > 0"``).

    Returns
    -------
    callable
        ``check(path, value) -> float``, raising :class:`ConfigError` naming ``path``.
    """
    kw = dict(lo=None if lo == -math.inf else lo, hi=None if hi == math.inf else hi, lo_open=lo_open,
              nonzero=nonzero, what=what)
    return lambda path, v: _config_error(validate.real, path, v, **kw)


def integer_check(lo, hi=None):
    """A checker of an integer in ``[lo, hi]`` (``bool`` refused).

    Parameters
    ----------
    lo : int
        Smallest value.
    hi : int, optional
        Largest value (None: none).

    Returns
    -------
    callable
        ``check(path, value) -> int``, raising :class:`ConfigError` naming ``path``.
    """
    return lambda path, v: _config_error(validate.integer, path, v, lo, hi)


def choice_check(allowed):
    """A checker of one of ``allowed`` (the message lists them).

    Parameters
    ----------
    allowed : iterable
        The allowed values (a registry's names).

    Returns
    -------
    callable
        ``check(path, value) -> value``, raising :class:`ConfigError` naming ``path`` and the allowed values.
    """
    return lambda path, v: _config_error(validate.choice, path, v, list(allowed))


def boolean_check(path, v):
    """``v`` checked to be ``true`` or ``false`` (the checker of a boolean field).

    Parameters
    ----------
    path : str
        The dotted key, for the message.
    v : object
        The value.

    Returns
    -------
    bool

    Raises
    ------
    ConfigError
        ``v`` not a bool.
    """
    if not isinstance(v, bool):
        raise ConfigError(f"{path} must be true or false; received {v!r}")
    return v


def optional_check(check):
    """The checker ``check`` that lets ``None`` (a key left out) through.

    Parameters
    ----------
    check : callable
        ``check(path, value)``.

    Returns
    -------
    callable
        ``check(path, value)``, or None for None.
    """
    def wrapped(path, v):
        return None if v is None else check(path, v)
    return wrapped


def real_list_check(lo=-math.inf, lo_open=False, min_len=1):
    """A checker of a list of at least ``min_len`` numbers, each ``>= lo`` (``> lo`` with ``lo_open``).

    Parameters
    ----------
    lo : float
        Bound of every item.
    lo_open : bool
        Exclude ``lo``.
    min_len : int
        Shortest length.

    Returns
    -------
    callable
        ``check(path, value) -> tuple of float``.

    Raises
    ------
    ConfigError
        From the checker, when it is called: not a list of at least ``min_len`` items (naming ``path``), or an item
        refused (naming ``path[i]``).
    """
    item = real_check(lo, lo_open=lo_open)

    def check(path, v):
        if not isinstance(v, (list, tuple)) or len(v) < min_len:
            raise ConfigError(f"{path} must be a list of at least {min_len} numbers; received {v!r}")
        return tuple(item(f"{path}[{i}]", x) for i, x in enumerate(v))
    return check


def unique_list(path, v, item):
    """A non-empty list of distinct values, each checked by ``item(path[i], x)``.

    Parameters
    ----------
    path : str
        The dotted key, for the messages.
    v : object
        The value.
    item : callable
        The checker of one item.

    Returns
    -------
    tuple

    Raises
    ------
    ConfigError
        ``v`` not a non-empty list, an item refused, or a value repeated.
    """
    if not isinstance(v, (list, tuple)) or not v:
        raise ConfigError(f"{path} must be a non-empty list; received {v!r}")
    out = tuple(item(f"{path}[{i}]", x) for i, x in enumerate(v))
    if len(set(out)) != len(out):
        raise ConfigError(f"{path} must not repeat a value; received {list(v)!r}")
    return out


def filename_check(path, v):
    """``v`` checked to be a plain NetCDF file name (``*.nc``, no folders, no control characters).

    Parameters
    ----------
    path : str
        The dotted key, for the message.
    v : object
        The value.

    Returns
    -------
    str

    Raises
    ------
    ConfigError
        Anything else.
    """
    if not (isinstance(v, str) and v and "/" not in v and "\\" not in v and v not in (".", "..")
            and v.isprintable() and v.endswith(".nc") and len(v) > 3):
        raise ConfigError(f"{path} must be a plain NetCDF file name ending in .nc (no folders, no control "
                          f"characters); received {v!r}")
    return v


def config_field(check, default=MISSING, doc="", *, default_factory=MISSING):
    """A dataclass field of a :class:`Section`: its checker and its one-line description.

    Parameters
    ----------
    check : callable
        ``check(path, value) -> value`` (run by :meth:`Section.from_dict`).
    default : object, optional
        The default value.
    doc : str
        The description (a comment of the TOML written by :func:`toml_table`).
    default_factory : callable, optional
        Makes the default (instead of ``default``).

    Returns
    -------
    dataclasses.Field
    """
    return field(default=default, default_factory=default_factory, metadata={"check": check, "doc": doc})


def check_keys(d, allowed, path=None) -> dict:
    """``d`` checked to be a table (dict) whose keys are all in ``allowed``.

    Parameters
    ----------
    d : object
        The parsed table.
    allowed : sequence of str
        The allowed keys (listed in the messages).
    path : str, optional
        The table's dotted key (None: the top level of a config file).

    Returns
    -------
    dict
        ``d`` itself.

    Raises
    ------
    ConfigError
        ``d`` not a dict, or a key not in ``allowed`` (named, with the allowed keys).
    """
    allowed = list(allowed)
    if not isinstance(d, dict):
        if path is None:
            raise ConfigError(f"the config must be a table (dict); received {type(d).__name__}")
        raise ConfigError(f"{path} must be a table of keys {allowed}; received {d!r}")
    for key in d:
        if key not in allowed:
            if path is None:
                raise ConfigError(f"unknown key {key}; allowed top-level keys: {allowed}")
            raise ConfigError(f"unknown key {path}.{key}; allowed keys in {path}: {allowed}")
    return d


# ---------------------------------------------------------------------------- the sections
class Section:
    """Shared ``from_dict`` / ``to_dict`` of a config section: a frozen dataclass whose fields are :func:`config_field` s.

    A subclass sets ``_path`` (its dotted key in messages) and may override ``_validate(path)`` for checks
    across its fields (raising :class:`ConfigError`).
    """

    _path = "section"

    @classmethod
    def from_dict(cls, d, path=None):
        """The validated section of a config table (missing keys take their defaults).

        Parameters
        ----------
        d : dict
            The TOML table.
        path : str, optional
            Its dotted key in messages (default: the class's ``_path``).

        Returns
        -------
        Section
            An instance of ``cls``.

        Raises
        ------
        ConfigError
            Not a table, an unknown key, or a value refused by its field's checker (named by its dotted key).
        """
        path = path or cls._path
        check_keys(d, [f.name for f in fields(cls)], path)
        kw = {f.name: f.metadata["check"](f"{path}.{f.name}", d[f.name]) for f in fields(cls) if f.name in d}
        obj = cls(**kw)
        obj._validate(path)
        return obj

    def _validate(self, path):
        pass

    def to_dict(self) -> dict:
        """Plain Python (lists, numbers, strings, tables), the inverse of :meth:`from_dict`; None values left out.

        Returns
        -------
        dict
        """
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is not None:
                out[f.name] = [list(x) if isinstance(x, tuple) else x for x in v] if isinstance(v, tuple) else v
        return out


def field_docs(section) -> dict:
    """The one-line description of each field of a section class (empty for None).

    Parameters
    ----------
    section : type or None
        A :class:`Section` subclass.

    Returns
    -------
    dict
        ``{field name: description}``.
    """
    return {f.name: f.metadata.get("doc", "") for f in fields(section)} if section else {}


# ---------------------------------------------------------------------------- TOML in
def parse_toml(text: str, where: str = "") -> dict:
    """TOML text as a dict.

    Parameters
    ----------
    text : str
        TOML.
    where : str
        The file, for the message.

    Returns
    -------
    dict

    Raises
    ------
    ConfigError
        Invalid TOML.
    """
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"invalid TOML{' in ' + where if where else ''}: {err}") from None


def read_text_file(path, what="config") -> str:
    """The text of a file.

    Parameters
    ----------
    path : str or path-like
        The file.
    what : str
        What the file is, for the message (``"config"``, ``"map"``, ...).

    Returns
    -------
    str

    Raises
    ------
    ConfigError
        A missing or unreadable file (named as ``what``).
    """
    try:
        return Path(path).read_text()
    except (FileNotFoundError, IsADirectoryError, PermissionError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read {what} file {str(path)!r}: {getattr(err, 'strerror', None) or err}") from None


def read_toml_file(path, what="config") -> dict:
    """:func:`read_text_file` then :func:`parse_toml` (the messages name the file).

    Parameters
    ----------
    path : str or path-like
        The file.
    what : str
        What the file is, for the message.

    Returns
    -------
    dict

    Raises
    ------
    ConfigError
        A missing or unreadable file, or invalid TOML.
    """
    return parse_toml(read_text_file(path, what), str(path))


# ---------------------------------------------------------------------------- TOML out
def toml_value(v) -> str:
    """TOML text of one value (bool, int, float with ``nan`` / ``inf``, str, list, inline table).

    Parameters
    ----------
    v : object
        The value.

    Returns
    -------
    str

    Raises
    ------
    TypeError
        A type TOML cannot hold (None included).
    """
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
    if isinstance(v, str):
        return '"' + "".join(c if c.isprintable() and c not in '"\\' else
                             ("\\" + c if c in '"\\' else f"\\u{ord(c):04x}") for c in v) + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):                           # an inline table
        return "{" + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"to_toml cannot write {type(v).__name__} values; received {v!r}")


def toml_table(name, table, section=None, array=False) -> list[str]:
    """The TOML lines of one table: its header, then ``key = value    # description`` (None values left out).

    Parameters
    ----------
    name : str
        The table's name.
    table : dict
        Its values (a section's :meth:`Section.to_dict`).
    section : type, optional
        Its :class:`Section` class, whose field descriptions become comments.
    array : bool
        An array of tables (``[[name]]``), e.g. ``heads``.

    Returns
    -------
    list of str

    Raises
    ------
    TypeError
        A value TOML cannot hold.
    """
    docs = field_docs(section)
    lines = [f"[[{name}]]" if array else f"[{name}]"]
    for key, val in table.items():
        if val is not None:
            doc = docs.get(key)
            lines.append(f"{key} = {toml_value(val)}" + (f"    # {doc}" if doc else ""))
    return lines
