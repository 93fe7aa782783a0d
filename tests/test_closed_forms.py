"""Every closed-form case of tests/closed_forms.py (MODEL.md's exact facts in one table).

``python -m pytest tests/test_closed_forms.py -v`` lists the cases by name; a failure prints the
value, the exact value, the worst error, the tolerance and the reason for it.
"""

import numpy as np
import pytest
from closed_forms import CASES, Case, compare


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_closed_form(case):
    ok, value, exact, err, allowed = compare(case)
    assert ok, (f"{case.name} [MODEL.md {case.section}]: |value - exact| = {err:.3g} > {allowed:.3g} "
                f"({case.why})\nvalue = {value}\nexact = {exact}")


def test_table_is_well_formed():
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)), "case names must be unique (they are the pytest ids)"
    for c in CASES:
        assert isinstance(c, Case) and c.section and c.why, c.name
        assert c.atol >= 0 and c.rtol >= 0 and (c.atol > 0 or c.rtol > 0), f"{c.name}: no tolerance given"
        assert c.rtol < 0.01, f"{c.name}: a relative tolerance of a percent or more is not a closed-form check"
    # MODEL.md section 5's checklist items with a closed form are all present (1-7; 8 is a rate fit)
    for item in ("5.1", "5.2 tangency", "5.2 rotation", "5.3", "5.7"):
        assert any(c.section.startswith(item) for c in CASES), item
    for topic in ("total-energy identity", "attention entropy", "equiangular reduced ODE", "late rate",
                  "Lambert W", "critical inverse temperature", "linear stability", "energy identity"):
        assert any(topic in c.section for c in CASES), topic


def test_compare_rule():
    """The pass rule is |value - exact| <= max(atol, rtol |exact|), elementwise, and NaN never passes."""
    def make(value, exact, atol=0.0, rtol=0.0):
        return Case("t", "s", lambda: value, exact, atol=atol, rtol=rtol, why="w")

    assert compare(make(1.0 + 1e-9, 1.0, rtol=2e-9))[0]
    assert not compare(make(1.0 + 1e-9, 1.0, rtol=5e-10))[0]
    assert compare(make([1.0, 2e-12], [1.0, 0.0], atol=3e-12))[0]           # atol covers the zero
    assert not compare(make([1.0, 2e-12], [1.0, 0.0], rtol=1e-6))[0]        # rtol alone does not
    # max, not sum: 1.5e-9 passes neither atol = 1e-9 nor rtol |exact| = 1e-9 alone
    assert not compare(make(1.0 + 1.5e-9, 1.0, atol=1e-9, rtol=1e-9))[0]
    assert not compare(make(np.nan, 0.0, atol=1.0))[0]
    assert compare(make(3.0, lambda: 3.0, atol=1e-15))[0]                   # exact may be computed
