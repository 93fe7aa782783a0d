"""Figures of a run dataset: every figure draws, is labelled, and `meanfield plot` redraws from a file."""

import numpy as np
import pytest
from matplotlib.figure import Figure
from PIL import Image

from meanfield.workflow import plotting, results
from meanfield.workflow.cli import main
from meanfield.workflow.config import RunConfig
from meanfield.workflow.run import run

TINY = {"pde": {"lmax": 10}, "particles": {"n": 60}, "integrator": {"t_final": 0.3, "n_frames": 3},
        "initial": {"kappas": [1.0]},
        "heads": [{"lam": 1.0}, {"lam": 0.5, "kernel": "relu"}], "outputs": {"dpi": 50}, "seed": 1}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    ds = run(RunConfig.from_dict(TINY), progress=False)
    assert ds.attrs["pde_status"] == 0, ds.attrs["pde_message"]       # every frame has a density
    return ds, results.save(ds, tmp_path_factory.mktemp("tiny") / "result.nc")


@pytest.mark.parametrize("make", list(plotting.FIGURES.values()), ids=list(plotting.FIGURES))
def test_each_figure_is_labelled_and_titled(tiny, make):
    ds, _ = tiny
    fig = make(ds)
    assert isinstance(fig, Figure)
    assert "lambda = (1, 0.5)" in fig.get_suptitle() + "".join(a.get_title() for a in fig.axes)
    for ax in fig.axes:
        if ax.name == "rectilinear" and ax.get_xticks().size and ax.lines:      # curve panels
            assert ax.get_xlabel() and ax.get_ylabel()


def test_growth_rates_leave_out_relu_heads_and_match_theory(tiny):
    ds, _ = tiny
    fig = plotting.growth_rate_spectrum(ds)
    ax = fig.axes[0]
    assert "ReLU heads [1] left out" in ax.get_title()
    from meanfield.analysis.stability import growth_rate
    exp_line = ax.lines[0]
    # the plotted points are stability.growth_rate itself (same function, exact)
    np.testing.assert_array_equal(exp_line.get_ydata(), growth_rate(np.arange(1, 11), [1.0], 1.0, "mean"))


def test_animation_has_one_frame_per_time(tiny, tmp_path):
    ds, _ = tiny
    path = plotting.save_animation(ds, tmp_path / "a.gif")
    with Image.open(path) as im:
        assert im.n_frames == ds.sizes["time"]


def test_meanfield_plot_redraws_from_a_file(tiny, tmp_path, capsys):
    ds, path = tiny
    assert main(["plot", str(path), "--out", str(tmp_path / "redrawn"), "--no-animation"]) == 0
    names = sorted(p.name for p in (tmp_path / "redrawn").iterdir())
    assert names == sorted(plotting.FIGURES)                      # the GIF has its own test above
    # drawing from the file gives the same pixels as drawing from the in-memory dataset (Agg is deterministic)
    plotting.w2_curve(ds).savefig(tmp_path / "direct.png", dpi=results.config_of(ds).outputs.dpi)
    a = np.asarray(Image.open(tmp_path / "direct.png"))
    b = np.asarray(Image.open(tmp_path / "redrawn" / "w2.png"))
    assert a.shape == b.shape and np.array_equal(a, b)
    assert "wrote 5 figures" in capsys.readouterr().out


def test_plot_errors_exit_2(tmp_path, capsys):
    assert main(["plot", str(tmp_path / "none.nc")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "junk.nc").write_text("not netcdf")
    assert main(["plot", str(tmp_path / "junk.nc")]) == 2
    err = capsys.readouterr().err
    assert "cannot read results file" in err and "Traceback" not in err
