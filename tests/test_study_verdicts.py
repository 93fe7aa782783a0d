"""The referee vocabulary of the studies: one word per verdict, a verdict section in every refereed report."""

import re

import pytest

from studies._common import ROOT, VERDICTS, verdict_section

REFEREED = ("energy_monotonicity", "radial_shadows", "critical_temperature", "heterogeneous_heads", "relu_vs_softmax",
            "entropy_production", "approximate_orthogonality", "linear_stability", "continuum_limit",
            "radial_dominance_invariance", "late_dominance", "many_heads", "continuum_scale",
            "negative_temperature", "long_context", "normalization_speed", "high_dimension", "phase_transitions", "phase_diagram", "metastability", "critical_noise",
            "orthogonal_heads", "trained_heads", "causal_attention")


def test_verdict_outside_vocabulary_is_refused_by_name():
    with pytest.raises(ValueError, match=r"verdict must be one of .*reproduced.*received 'fails'"):
        verdict_section([["claim", "hypotheses", "fails", "evidence"]])


def test_verdict_section_renders_each_row():
    text = verdict_section([["c", "h", v, "e"] for v in VERDICTS])
    # one table row per verdict, each verdict in bold exactly as in the vocabulary (no tolerance: text)
    assert [f"**{v}**" in text for v in VERDICTS] == [True] * len(VERDICTS)


@pytest.mark.parametrize("name", REFEREED)
def test_committed_report_has_verdicts_in_the_vocabulary(name):
    text = (ROOT / name / "output" / "report.md").read_text()
    assert "## Verdicts against the paper's hypotheses" in text
    section = text.split("## Verdicts against the paper's hypotheses")[1].split("## Claims and verdicts")[0]
    found = re.findall(r"\*\*([^*]+)\*\*", section)
    assert found and all(v in VERDICTS for v in found), found
