"""An image scraper of the gallery (``conf.py``: ``image_scrapers``), importable by name so the config pickles."""


def library_figures(block, block_vars, gallery_conf):
    """Scrape the figures the package's plotting functions return (``matplotlib.figure.Figure`` objects,
    not registered with pyplot, which the matplotlib scraper alone would miss): every Figure bound to a
    name of the example not yet shown."""
    from matplotlib.figure import Figure
    from sphinx_gallery.scrapers import figure_rst

    paths = []
    for value in list(block_vars["example_globals"].values()):
        if isinstance(value, Figure) and value.canvas.manager is None and not getattr(value, "_shown", False):
            path = next(block_vars["image_path_iterator"])
            value.savefig(path, dpi=90)
            value._shown = True
            paths.append(path)
    return figure_rst(paths, gallery_conf["src_dir"])
