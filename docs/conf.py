"""Sphinx configuration of the meanfield documentation (build: see BUILD.md or README's "Documentation").

One command, warnings as errors::

    .venv/bin/python -m sphinx -W --keep-going -b html docs docs/_build/html

Pages are MyST markdown (``myst_parser``), the API reference is autodoc + autosummary over every public
module (numpydoc docstrings), and the gallery (``sphinx_gallery``) executes every ``examples/plot_*.py`` at
quick sizes on each build.  A check at the end of reading (``env-check-consistency``) warns, hence fails the
build, when a name of ``meanfield.__all__`` or of any public module's ``__all__`` has no entry in the API
reference.
"""

import importlib
import inspect
import os
import pkgutil
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS))              # gallery_scrapers
os.environ.setdefault("MPLBACKEND", "Agg")

import meanfield  # noqa: E402

project = "meanfield"
author = "the meanfield authors"
copyright = "the meanfield authors, BSD-3-Clause"
release = version = meanfield.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "generated/*.examples", "auto_examples/*.ipynb", "auto_examples/*.py",
                    "auto_examples/*.zip", "auto_examples/*.json", "auto_examples/*.md5", "figures"]

# -- API reference: one page per public module, every member of its __all__ ------------------------------
autosummary_generate = True
autosummary_imported_members = False
autodoc_typehints = "none"              # signatures as written; the docstrings carry the types (numpydoc)
autodoc_member_order = "bysource"
numpydoc_show_class_members = False     # autodoc lists the members; numpydoc only renders the sections
numpydoc_class_members_toctree = False
numpydoc_validation_checks = set()      # formatting is checked by docutils (-W), not numpydoc's style rules
nitpicky = False                        # cross-references to numpy / xarray types are plain text

# -- pages --------------------------------------------------------------------------------------------------
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3
html_theme = "pydata_sphinx_theme"
html_title = f"meanfield {release}"
html_theme_options = {"navigation_depth": 3, "show_toc_level": 2}
html_static_path = []

# -- gallery: every examples/plot_*.py runs at quick sizes on each build; a failing script fails the build --
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "reset_modules": ("matplotlib",),
    "capture_repr": (),
    "image_scrapers": ("gallery_scrapers.library_figures", "matplotlib"),   # ours first: pyplot figures still have a manager
    "min_reported_time": 1,
    "abort_on_example_error": False,     # run them all, then fail the build naming every broken script
    "only_warn_on_example_error": False,
}


# -- the list of meanfield.__all__ with each name's home, and the completeness check -----------------------
def public_modules():
    """Every importable public module of the package (no ``_private`` part), sorted."""
    names = ["meanfield"]
    for info in pkgutil.walk_packages(meanfield.__path__, "meanfield."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return sorted(names) + ["meanfield_cli"]


def home(name):
    """Where ``meanfield.<name>`` is defined (a module's own name for the modules)."""
    obj = getattr(meanfield, name)
    if inspect.ismodule(obj):
        return obj.__name__
    module = getattr(obj, "__module__", None)
    if module and hasattr(importlib.import_module(module), name):
        return f"{module}.{name}"
    for mod in public_modules():                     # data (SCHEMES, METHODS): the module whose __all__ has it
        m = importlib.import_module(mod)
        if mod != "meanfield" and name in getattr(m, "__all__", ()) and getattr(m, name) is obj:
            return f"{mod}.{name}"
    raise RuntimeError(f"no home module found for meanfield.{name}")


def write_top_level():
    lines = [".. This file is written by conf.py on every build (meanfield.__all__); do not edit.", "",
             ".. list-table::", "   :header-rows: 1", "   :widths: 30 70", "", "   * - ``meanfield.``",
             "     - defined in"]
    for name in meanfield.__all__:
        if name == "__version__":
            lines += ["   * - ``__version__``", "     - the version string, ``meanfield/_version.py``"]
            continue
        target = home(name)
        role = "mod" if target == getattr(getattr(meanfield, name), "__name__", None) else "obj"
        lines += [f"   * - ``{name}``", f"     - :{role}:`{target}`"]
    out = DOCS / "generated"
    out.mkdir(exist_ok=True)
    (out / "top_level.rst").write_text("\n".join(lines) + "\n")


def check_api_complete(app, env):
    from sphinx.util import logging

    log = logging.getLogger("meanfield.api")
    documented = set(env.get_domain("py").objects)
    missing = [home(n) for n in meanfield.__all__ if n != "__version__" and home(n) not in documented]
    for mod in public_modules():
        m = importlib.import_module(mod)
        if mod not in documented:
            missing.append(mod)
        if mod != "meanfield":
            missing += [f"{mod}.{n}" for n in getattr(m, "__all__", ()) if f"{mod}.{n}" not in documented]
    for name in sorted(set(missing)):
        log.warning(f"public name {name} has no entry in the API reference")


def module_data():
    """The data (not classes, functions or modules) of each public module's ``__all__``: autodoc's
    ``:members:`` leaves out module data without a docstring, so the module template lists them."""
    out = {}
    for mod in public_modules():
        m = importlib.import_module(mod)
        if mod == "meanfield":
            continue
        out[mod] = [n for n in getattr(m, "__all__", ())
                    if not (inspect.isclass(getattr(m, n)) or inspect.ismodule(getattr(m, n))
                            or callable(getattr(m, n)))]
    return out


autosummary_context = {"module_data": module_data()}
write_top_level()


GALLERY_LINK = re.compile(r"\]\(\.\./examples/(plot_\w+)\.py\)")
OUTSIDE_LINK = re.compile(r"\[([^\]]+)\]\((\.\./[^)\s]+)\)")


def link_outside_files(app, docname, source):
    """Markdown links from a page to a gallery script go to its gallery page; other links to files outside
    ``docs/`` (the studies' reports) become downloads.  The pages keep plain relative links, so they read
    the same on GitHub."""
    source[0] = GALLERY_LINK.sub(r"](auto_examples/\1.rst)", source[0])
    source[0] = source[0].replace("](../examples/GALLERY_HEADER.rst)", "](auto_examples/index.rst)")
    source[0] = OUTSIDE_LINK.sub(lambda m: f"{{download}}`{m.group(1)} <{m.group(2)}>`", source[0])


def setup(app):
    app.connect("source-read", link_outside_files)
    app.connect("env-check-consistency", check_api_complete)
