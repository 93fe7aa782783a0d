"""The (l, m) table of coefficients is fixed by core/sphere.py alone (results.py only calls it)."""

import numpy as np
import pytest

from meanfield.core.sphere import SphereGrid, from_lm_table, lm_indices, to_lm_table
from meanfield.workflow import results


@pytest.mark.parametrize("lmax", [2, 7, 31])
def test_lm_indices_are_the_grids_layout(lmax):
    l_index, m_index = lm_indices(lmax)
    for grid in (SphereGrid(lmax), SphereGrid.dealiased(lmax)):
        # integer layouts: exactly equal
        np.testing.assert_array_equal(l_index, grid.l_index)
        np.testing.assert_array_equal(m_index, grid.m_index)
    assert [grid.index(l, m) for l, m in zip(l_index, m_index)] == list(range(grid.nalm))


def test_lm_table_round_trip_with_leading_dimensions():
    grid = SphereGrid(5)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 2, grid.nalm)) + 1j * rng.standard_normal((3, 2, grid.nalm))
    re, im = to_lm_table(a, 5)
    assert re.shape == im.shape == (3, 2, 6, 6)
    assert np.isnan(re[..., 1, 2]).all() and np.isnan(im[..., 0, 5]).all()      # m > l: NaN
    # (l, m) lands at [l, m]; values are copied, not computed: exact
    assert re[2, 1, 4, 3] == a[2, 1, grid.index(4, 3)].real and im[0, 0, 5, 0] == a[0, 0, grid.index(5, 0)].imag
    np.testing.assert_array_equal(from_lm_table(re, im), a)
    single = to_lm_table(a[0, 0], 5)
    np.testing.assert_array_equal(single[0], re[0, 0])
    # results' public helpers are the same functions behind the old signatures (identical floats)
    r2, i2 = results.coefficients_to_lm(a, grid.l_index, grid.m_index, 5)
    np.testing.assert_array_equal(r2, re)
    np.testing.assert_array_equal(results.lm_to_coefficients(re, im, grid.l_index, grid.m_index), a)


def test_lm_table_bad_input():
    grid = SphereGrid(4)
    with pytest.raises(ValueError, match=r"f_lm must have shape \(..., nalm\) with nalm = 15 for lmax = 4"):
        to_lm_table(np.zeros(14, complex), 4)
    with pytest.raises(ValueError, match="re and im must have the same shape"):
        from_lm_table(np.zeros((5, 5)), np.zeros((5, 4)))
    with pytest.raises(ValueError, match="lmax must be an integer >= 0; received -1"):
        lm_indices(-1)
    with pytest.raises(ValueError, match="l_index and m_index must be the coefficient layout"):
        results.coefficients_to_lm(np.zeros(grid.nalm, complex), grid.l_index[::-1], grid.m_index[::-1], 4)
