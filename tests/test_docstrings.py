"""numpydoc sections on the public API (issue 32, item 4): ``Parameters``, ``Returns``, ``Raises``.

What is checked: every module of ``meanfield`` (``pkgutil.walk_packages``; modules whose dotted name has a
part starting with ``_`` are skipped), every name of its ``__all__`` that is a function or a class defined in
that module (``obj.__module__`` is the module: a re-export is checked in its home module only), and the
public methods of those classes: the functions of the class ``__dict__`` (plain, ``staticmethod`` or
``classmethod``) whose name does not start with ``_`` and whose code lives in the module's file (properties
and generated methods such as a dataclass's are not functions of the source).  Each is called by its
qualified name ``module:qualname`` (``meanfield.core.heads:Head.replace``).

The docstring is the one the API reference shows (``inspect.getdoc``: an override without its own
docstring shows its parent's).  A class's docstring documents its constructor.  The rules:

* ``Parameters`` when the callable takes a parameter: any parameter of its signature besides the first of a
  method or classmethod (``self``/``cls``); for a class, the parameters of ``inspect.signature(cls)`` when the
  constructor is written in ``meanfield`` (a Python ``__init__``/``__new__``/``__post_init__`` of a meanfield
  class on its MRO, or a dataclass's generated ``__init__``); a constructor inherited from outside
  (``Exception``, ``typing.Protocol``, ``tuple``) needs none.
* ``Returns`` (or ``Yields``) when a function or method returns something: its return annotation when it
  has one (anything but ``None`` / ``NoReturn`` returns something), otherwise its source (``ast``): a
  ``return`` with a value other than the constant ``None``, or a ``yield``, in its own body (nested
  functions and lambdas are not its body).  Classes need no ``Returns`` (they return the instance).
* ``Raises`` when the callable validates its input, read from its source (``ast``, so comments and strings do
  not count; decorated functions are unwrapped): a ``raise`` with an exception (a bare ``raise`` only
  re-raises and is not counted), or a call of a validation helper: ``validate.<name>(...)`` (except
  ``validate.outside_stacklevel``, which computes a warning's stack level and never raises), a function
  named ``_fail``, or a function whose name ends in ``guard`` (``cost.guard``, ``_matrices_guard``, ...).
  For a class, the source is its constructor's: the ``__init__``, ``__new__`` and ``__post_init__`` of its
  own ``__dict__``.  A helper called without these names (a private ``_check(...)`` that raises) is not
  seen: the rule is a floor, not a proof.

A section counts when its heading line is followed by an underline of dashes at least as long
(numpydoc's rule) and by at least one non-blank line before the next heading.  The headings are parsed here
(numpydoc is in the docs extra, not the test extra); when numpydoc is installed,
:func:`test_numpydoc_reads_the_same_sections` checks that ``numpydoc.docscrape`` (``FunctionDoc`` /
``ClassDoc``) parses every section found here into at least one entry.

The names that still lack a section are listed in :data:`PENDING`, which may only shrink:
:func:`test_public_callables_have_numpydoc_sections` fails when a name outside it lacks a section and
when a name in it is now documented or no longer exists (remove it from the list then).  Run this file as
a script (``python tests/test_docstrings.py``) to print the counts and the names that lack sections.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import sys
import textwrap
import warnings

import meanfield

SECTIONS = ("Parameters", "Returns", "Yields", "Raises")
_NO_RETURN = {"None", "NoReturn", "typing.NoReturn", "Never"}
_NOT_VALIDATING = {"outside_stacklevel"}


# --------------------------------------------------------------------------------------------------------
# what is checked
# --------------------------------------------------------------------------------------------------------


def public_modules():
    """The importable public modules of ``meanfield`` (the package itself included), sorted by name."""
    names = ["meanfield"] + [m.name for m in pkgutil.walk_packages(meanfield.__path__, prefix="meanfield.")]
    return [importlib.import_module(n) for n in sorted(names)
            if not any(part.startswith("_") for part in n.split("."))]


def _own_functions(cls, mod):
    """(name, function, kind) of the public methods written in ``cls``'s body (kind: method, static, classmethod)."""
    path = getattr(mod, "__file__", None)
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        kind = "static" if isinstance(value, staticmethod) else "classmethod" if isinstance(value, classmethod) else "method"
        func = value.__func__ if kind != "method" else value
        if not inspect.isfunction(func):
            continue                                       # properties, nested classes, data
        code = getattr(inspect.unwrap(func), "__code__", None)
        if code is None or code.co_filename != path:
            continue                                       # generated (dataclass) or borrowed from elsewhere
        yield name, func, kind


def public_callables():
    """``{"module:qualname": (obj, kind)}`` for every checked object; kind is function, class, method, static or
    classmethod."""
    out = {}
    for mod in public_modules():
        for name in getattr(mod, "__all__", ()):
            obj = getattr(mod, name, None)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)) or obj.__module__ != mod.__name__:
                continue
            if inspect.isfunction(obj):
                out[f"{mod.__name__}:{obj.__qualname__}"] = (obj, "function")
                continue
            out[f"{mod.__name__}:{obj.__qualname__}"] = (obj, "class")
            for mname, func, kind in _own_functions(obj, mod):
                out[f"{mod.__name__}:{obj.__qualname__}.{mname}"] = (func, kind)
    return out


# --------------------------------------------------------------------------------------------------------
# the rules
# --------------------------------------------------------------------------------------------------------


def _source_tree(func):
    """The ``ast.FunctionDef`` of ``func`` (unwrapped), or None when its source cannot be read."""
    try:
        src = textwrap.dedent(inspect.getsource(inspect.unwrap(func)))
    except (OSError, TypeError):
        return None
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    return None


def _own_body(node):
    """The nodes of a function's own body: nested functions, lambdas and classes are not entered."""
    stack = list(node.body)
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(n))


def _call_name(call):
    f = call.func
    if isinstance(f, ast.Name):
        return None, f.id
    if isinstance(f, ast.Attribute):
        owner = f.value.id if isinstance(f.value, ast.Name) else None
        return owner, f.attr
    return None, None


def validates(tree) -> bool:
    """The ``Raises`` rule on one function's ``ast``: a raise with an exception, or a validation helper's call."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Raise) and n.exc is not None:
            return True
        if isinstance(n, ast.Call):
            owner, name = _call_name(n)
            if name is None:
                continue
            if owner == "validate" and name not in _NOT_VALIDATING:
                return True
            if name == "_fail" or name.endswith("guard"):
                return True
    return False


def returns_something(func) -> bool:
    """The ``Returns`` rule: the return annotation when there is one, otherwise a valued return or a yield."""
    try:
        ann = inspect.signature(func, eval_str=False).return_annotation
    except (TypeError, ValueError):
        ann = inspect.Signature.empty
    if ann is not inspect.Signature.empty:
        text = ann if isinstance(ann, str) else getattr(ann, "__name__", repr(ann))
        return ann is not None and text.strip() not in _NO_RETURN
    tree = _source_tree(func)
    if tree is None:
        return False
    for n in _own_body(tree):
        if isinstance(n, (ast.Yield, ast.YieldFrom)):
            return True
        if isinstance(n, ast.Return) and n.value is not None and not (
                isinstance(n.value, ast.Constant) and n.value.value is None):
            return True
    return False


def _constructor_parts(cls):
    """The constructor functions written in meanfield for ``cls`` (its MRO up to the first outside class)."""
    parts, dataclass_init = [], False
    for klass in cls.__mro__:
        if klass is object:
            break
        own = vars(klass)
        if not klass.__module__.startswith("meanfield"):
            if "__init__" in own or "__new__" in own:
                break                                       # Exception, Protocol, tuple, ...: not ours
            continue
        if "__dataclass_fields__" in own and "__init__" in own:
            dataclass_init = True
        for key in ("__init__", "__new__", "__post_init__"):
            f = own.get(key)
            f = f.__func__ if isinstance(f, (staticmethod, classmethod)) else f
            if inspect.isfunction(f) and f.__code__.co_filename == getattr(sys.modules[klass.__module__], "__file__", 0):
                parts.append((klass, f))
        if "__init__" in own or "__new__" in own:
            break
    return parts, dataclass_init


def required_sections(obj, kind) -> set[str]:
    """The sections ``obj`` must have under the rules of the module docstring."""
    need = set()
    if kind == "class":
        parts, dataclass_init = _constructor_parts(obj)
        if parts or dataclass_init:
            try:
                if inspect.signature(obj).parameters:
                    need.add("Parameters")
            except (TypeError, ValueError):
                pass
        for klass, f in parts:
            if klass is obj:
                tree = _source_tree(f)
                if tree is not None and validates(tree):
                    need.add("Raises")
        return need
    params = list(inspect.signature(inspect.unwrap(obj), follow_wrapped=False).parameters)
    if kind in ("method", "classmethod"):
        params = params[1:]
    if params:
        need.add("Parameters")
    if returns_something(obj):
        need.add("Returns")
    tree = _source_tree(obj)
    if tree is not None and validates(tree):
        need.add("Raises")
    return need


_HEADING = re.compile(r"^(\w[\w ]*\w)\s*$")


def sections(obj) -> set[str]:
    """The numpydoc section headings of ``obj``'s docstring that have an entry (parsed here, no numpydoc)."""
    lines = (inspect.getdoc(obj) or "").splitlines()
    heads = [i for i in range(len(lines) - 1)
             if _HEADING.match(lines[i].strip()) and re.fullmatch(r"-{3,}", lines[i + 1].strip())
             and len(lines[i + 1].strip()) >= len(lines[i].strip())]
    found = set()
    for k, i in enumerate(heads):
        end = heads[k + 1] if k + 1 < len(heads) else len(lines)
        if any(line.strip() for line in lines[i + 2:end]):
            found.add(lines[i].strip())
    return found


def missing_sections(obj, kind) -> set[str]:
    """The required sections ``obj``'s docstring lacks (``Yields`` stands for ``Returns``; a dataclass's
    ``Attributes`` for its ``Parameters``: its fields are its constructor's parameters)."""
    have = sections(obj)
    if "Yields" in have:
        have.add("Returns")
    if kind == "class" and "Attributes" in have and "__dataclass_fields__" in vars(obj):
        have.add("Parameters")
    return required_sections(obj, kind) - have


def report():
    """``(callables, missing)``: every checked object and ``{name: sorted missing sections}``."""
    objs = public_callables()
    missing = {}
    for name, (obj, kind) in objs.items():
        m = missing_sections(obj, kind)
        if m:
            missing[name] = sorted(m)
    return objs, missing


# --------------------------------------------------------------------------------------------------------
# the names that still lack a section (may only shrink)
# --------------------------------------------------------------------------------------------------------

# Written by the issue-32 pass (2026-12-03): what was left are the modules being edited by others at the time
# (core/kernels, core/sums, core/backends, core/densities, core/cost, core/resolution, models/particles,
# models/batched, analysis/diagnostics, field_diagnostics, equilibria, sphere_states, axisymmetric, the
# workflow's equilibria_*, run, jobs, simulate, reduced, paired, preflight, extend).  The comment of an entry
# names the sections it lacks.  Remove an entry when its sections are written (the test says which).
PENDING = frozenset({
})


# --------------------------------------------------------------------------------------------------------
# the tests
# --------------------------------------------------------------------------------------------------------


def test_public_callables_have_numpydoc_sections():
    objs, missing = report()
    new = {k: v for k, v in missing.items() if k not in PENDING}
    done = sorted(k for k in PENDING if k in objs and k not in missing)
    gone = sorted(k for k in PENDING if k not in objs)
    msg = []
    if new:
        msg.append("lack numpydoc sections (write them; PENDING may only shrink):\n" +
                   "\n".join(f"  {k}: {', '.join(v)}" for k, v in sorted(new.items())))
    if done:
        msg.append("documented now, remove from PENDING:\n" + "\n".join(f"  {k!r}," for k in done))
    if gone:
        msg.append("no longer a public callable, remove from PENDING:\n" + "\n".join(f"  {k!r}," for k in gone))
    assert not msg, "\n".join(msg)


def test_the_walk_finds_the_top_level_api():
    # the walk is not empty by accident: every class and function of meanfield.__all__ is checked in its home
    objs = public_callables()
    homes = {f"{o.__module__}:{o.__qualname__}" for n in meanfield.__all__
             if inspect.isclass(o := getattr(meanfield, n)) or inspect.isfunction(o)}
    assert homes and homes <= set(objs)
    assert "meanfield.models.particles:ParticleSystem.velocity" in objs
    assert len(objs) > 500


def test_the_rules_on_known_cases():
    from meanfield.core import cost, heads

    objs = public_callables()
    # a dataclass validated in __post_init__: Parameters and Raises, no Returns
    assert required_sections(heads.Head, "class") == {"Parameters", "Raises"}
    # a classmethod validating its factors and returning a Head
    assert required_sections(*objs["meanfield.core.heads:Head.from_factors"]) == {"Parameters", "Returns", "Raises"}
    # the guard: raises and returns its Cost
    assert required_sections(cost.guard, "function") == {"Parameters", "Returns", "Raises"}
    # a property is not a method of the source: not checked
    assert "meanfield.core.heads:Head.dim" not in objs
    # the parser: Head documents Parameters and Raises
    assert sections(heads.Head) >= {"Parameters", "Raises"}


def test_numpydoc_reads_the_same_sections():
    from numpydoc import docscrape  # in the test extra: this check runs everywhere, CI included
    bad = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")               # numpydoc's notes on unknown sections: not ours to judge
        for name, (obj, kind) in public_callables().items():
            found = sections(obj) & set(SECTIONS)
            if not found:
                continue
            try:
                doc = (docscrape.ClassDoc(obj, config={"show_class_members": False}) if kind == "class"
                       else docscrape.FunctionDoc(obj))
            except Exception as exc:                  # noqa: BLE001 - numpydoc refuses the docstring
                bad.append(f"{name}: numpydoc cannot parse it ({exc})")
                continue
            for s in sorted(found):
                if not doc[s]:
                    bad.append(f"{name}: numpydoc reads no entry in {s}")
    assert not bad, "\n".join(bad)


if __name__ == "__main__":
    objs, missing = report()
    print(f"{len(objs) - len(missing)} of {len(objs)} public callables have their sections; {len(missing)} lack some")
    for k in sorted(missing):
        print(f"    {k!r},  # {', '.join(missing[k])}")
