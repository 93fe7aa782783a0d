"""meanfield.models.encoder on tiny synthetic weights: the forward pass against a per-token loop written here, the
heads' M and V against the weights, the attention-only variants, the causal mask and the refusals (issue 34)."""

import math

import numpy as np
import pytest

from meanfield.core.schedules import HeadSchedule
from meanfield.models import encoder as E

D, H, M_MLP, VOCAB, POS = 8, 2, 12, 11, 7
# float64 on both sides, the same operations in another order (matrix products vs. loops): a few ulps per
# operation through 2 layers of O(1) numbers, 1e-12 relative leaves a margin of about 1e3
TOL = 1e-12


def _layer(rng, d=D, m=M_MLP):
    r = lambda *s: rng.normal(size=s) / math.sqrt(s[-1])        # noqa: E731 -- O(1) activations
    return E.LayerWeights(query_weight=r(d, d), query_bias=0.3 * rng.normal(size=d), key_weight=r(d, d),
                          key_bias=0.3 * rng.normal(size=d), value_weight=r(d, d), value_bias=0.3 * rng.normal(size=d),
                          output_weight=r(d, d), output_bias=0.3 * rng.normal(size=d),
                          attention_norm_weight=1 + 0.2 * rng.normal(size=d), attention_norm_bias=0.1 * rng.normal(size=d),
                          mlp_in_weight=r(m, d), mlp_in_bias=0.1 * rng.normal(size=m), mlp_out_weight=r(d, m),
                          mlp_out_bias=0.1 * rng.normal(size=d), mlp_norm_weight=1 + 0.2 * rng.normal(size=d),
                          mlp_norm_bias=0.1 * rng.normal(size=d))


def bert_like(seed=0, n_layers=2):
    rng = np.random.default_rng(seed)
    return E.EncoderWeights(word_embeddings=rng.normal(size=(VOCAB, D)), position_embeddings=rng.normal(size=(POS, D)),
                            layers=tuple(_layer(rng) for _ in range(n_layers)), n_heads=H,
                            token_type_embeddings=rng.normal(size=(2, D)), embedding_norm_weight=1 + 0.1 * rng.normal(size=D),
                            embedding_norm_bias=0.1 * rng.normal(size=D), layer_norm_eps=1e-12)


def gpt2_like(seed=1, n_layers=2):
    rng = np.random.default_rng(seed)
    return E.EncoderWeights(word_embeddings=rng.normal(size=(VOCAB, D)), position_embeddings=rng.normal(size=(POS, D)),
                            layers=tuple(_layer(rng) for _ in range(n_layers)), n_heads=H,
                            final_norm_weight=1 + 0.1 * rng.normal(size=D), final_norm_bias=0.1 * rng.normal(size=D),
                            layer_norm_eps=1e-5, activation="gelu_new", causal=True, norm_position="pre")


# ------------------------------------------------------------------ an independent loop implementation
def _ln(v, g, b, eps):
    mu = sum(v) / len(v)
    var = sum((a - mu) ** 2 for a in v) / len(v)
    out = np.array([(a - mu) / math.sqrt(var + eps) for a in v])
    return out if g is None else out * g + b


def _act(z, kind):
    if kind == "gelu":
        return np.array([0.5 * a * (1 + math.erf(a / math.sqrt(2))) for a in z])
    return np.array([0.5 * a * (1 + math.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3))) for a in z])


def _attn_loop(w, lw, xs, biases=True):
    n, dh = len(xs), D // H
    bq, bk, bv, bo = ((lw.query_bias, lw.key_bias, lw.value_bias, lw.output_bias) if biases else (0, 0, 0, 0))
    q = [lw.query_weight @ x + bq for x in xs]
    k = [lw.key_weight @ x + bk for x in xs]
    v = [lw.value_weight @ x + bv for x in xs]
    out = []
    for i in range(n):
        ctx = np.zeros(D)
        for h in range(H):
            sl = slice(h * dh, (h + 1) * dh)
            js = range(i + 1) if w.causal else range(n)
            s = [float(q[i][sl] @ k[j][sl]) / math.sqrt(dh) for j in js]
            e = [math.exp(a - max(s)) for a in s]
            for j, ej in zip(js, e):
                ctx[sl] += ej / sum(e) * v[j][sl]
        out.append(lw.output_weight @ ctx + bo)
    return out


def reference(w, ids, types=None, mlp=True, biases=True, affine=True):
    types = [0] * len(ids) if types is None else types
    xs = []
    for p, (t, s) in enumerate(zip(ids, types)):
        x = w.word_embeddings[t] + w.position_embeddings[p]
        if w.token_type_embeddings is not None:
            x = x + w.token_type_embeddings[s]
        if w.embedding_norm_weight is not None:
            x = _ln(x, w.embedding_norm_weight, w.embedding_norm_bias, w.layer_norm_eps)
        xs.append(x)
    out = [np.array(xs)]
    eps = w.layer_norm_eps
    for lw in w.layers:
        g1, b1, g2, b2 = ((lw.attention_norm_weight, lw.attention_norm_bias, lw.mlp_norm_weight, lw.mlp_norm_bias)
                          if affine else (None,) * 4)
        if w.norm_position == "post":
            a = _attn_loop(w, lw, xs, biases)
            xs = [_ln(x + ai, g1, b1, eps) for x, ai in zip(xs, a)]
            if mlp:
                xs = [_ln(x + lw.mlp_out_weight @ _act(lw.mlp_in_weight @ x + lw.mlp_in_bias, w.activation)
                          + lw.mlp_out_bias, g2, b2, eps) for x in xs]
        else:
            a = _attn_loop(w, lw, [_ln(x, g1, b1, eps) for x in xs], biases)
            xs = [x + ai for x, ai in zip(xs, a)]
            if mlp:
                xs = [x + lw.mlp_out_weight @ _act(lw.mlp_in_weight @ _ln(x, g2, b2, eps) + lw.mlp_in_bias,
                                                   w.activation) + lw.mlp_out_bias for x in xs]
        out.append(np.array(xs))
    if w.final_norm_weight is not None:
        g, b = (w.final_norm_weight, w.final_norm_bias) if affine else (None, None)
        out[-1] = np.array([_ln(x, g, b, eps) for x in out[-1]])
    return np.array(out)


def _rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


IDS = [3, 0, 10, 5, 5, 7]


# ------------------------------------------------------------------------------------------- the tests
@pytest.mark.parametrize("make", [bert_like, gpt2_like], ids=["post_ln", "pre_ln_causal"])
def test_forward_equals_a_per_token_loop(make):
    w = make()
    got = E.forward(w, IDS)
    assert got.shape == (w.n_layers + 1, len(IDS), D) and got.dtype == np.float64
    assert _rel(got, reference(w, IDS)) < TOL


def test_token_types_enter_the_embeddings():
    w = bert_like()
    types = [0, 0, 0, 1, 1, 1]
    assert _rel(E.forward(w, IDS, types), reference(w, IDS, types)) < TOL
    assert _rel(E.embed(w, IDS, types), reference(w, IDS, types)[0]) < TOL
    assert _rel(E.forward(w, IDS, types), E.forward(w, IDS)) > 1e-3      # they change the result


@pytest.mark.parametrize("make", [bert_like, gpt2_like], ids=["post_ln", "pre_ln_causal"])
@pytest.mark.parametrize("biases", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_attention_only_equals_the_loop_without_mlp(make, biases, affine):
    w = make()
    got = E.attention_forward(w, IDS, biases=biases, norm_affine=affine)
    assert _rel(got, reference(w, IDS, mlp=False, biases=biases, affine=affine)) < TOL


def test_attention_only_without_affine_gives_centered_rows_of_norm_sqrt_d():
    got = E.attention_forward(bert_like(), IDS, biases=False, norm_affine=False)[1:]
    # (x - mean) / sqrt(var + eps): mean 0 to rounding (1e-14 on O(1) entries); |row| = sqrt(d) (1 - eps / (2 var))
    # with eps = 1e-12: for rows of variance >= 1e-2 (O(1) numbers) within 1.5e-10 of sqrt(d), 1e-9 leaves a margin
    assert np.max(np.abs(got.mean(axis=-1))) < 1e-14
    assert np.max(np.abs(np.linalg.norm(got, axis=-1) - math.sqrt(D))) < 1e-9


@pytest.mark.parametrize("make", [bert_like, gpt2_like], ids=["post_ln", "pre_ln_causal"])
def test_the_key_bias_cancels_in_softmax(make):
    # <q_i, k_j + b_K> = <q_i, k_j> + <q_i, b_K>: the same shift for every key of query i, softmax-invariant
    w = make()
    zero_key = E.EncoderWeights(**{**w.__dict__, "layers": tuple(
        E.LayerWeights(**{**lw.__dict__, "key_bias": np.zeros(D)}) for lw in w.layers)})
    assert _rel(E.forward(zero_key, IDS), E.forward(w, IDS)) < TOL          # exact up to rounding
    zero_query = E.EncoderWeights(**{**w.__dict__, "layers": tuple(
        E.LayerWeights(**{**lw.__dict__, "query_bias": np.zeros(D)}) for lw in w.layers)})
    assert _rel(E.forward(zero_query, IDS), E.forward(w, IDS)) > 1e-3       # the query bias does not cancel


def test_causal_mask_hides_later_tokens():
    w, b = gpt2_like(), bert_like()
    other = IDS[:-1] + [2]                                     # the last token changed
    hc, hc2 = E.forward(w, IDS), E.forward(w, other)
    assert np.array_equal(hc[:, :-1], hc2[:, :-1])             # earlier tokens never see it: bit for bit
    assert _rel(hc[:, -1], hc2[:, -1]) > 1e-3
    hb, hb2 = E.forward(b, IDS), E.forward(b, other)
    assert _rel(hb[1:, 0], hb2[1:, 0]) > 1e-3                  # bidirectional: the first token sees it


@pytest.mark.parametrize("make", [bert_like, gpt2_like], ids=["post_ln", "pre_ln_causal"])
def test_heads_are_the_factored_trained_heads(make):
    w = make()
    dh = D // H
    for L, lw in enumerate(w.layers):
        heads = E.layer_heads(w, L)
        assert len(heads) == H
        for h, head in enumerate(heads):
            sl = slice(h * dh, (h + 1) * dh)
            M = lw.query_weight[sl].T @ lw.key_weight[sl] / math.sqrt(dh)
            V = lw.output_weight[:, sl] @ lw.value_weight[sl]
            # the same products formed once more: float64 rounding of an 8 x 4 x 8 product, 1e-14 relative
            assert np.max(np.abs(head.M - M)) <= 1e-14 * np.max(np.abs(M))
            assert np.max(np.abs(head.V - V)) <= 1e-14 * np.max(np.abs(V))
            assert head.rank == (dh, dh) and head.normalization == "softmax" and head.kernel == "exp"
            assert head.beta == 1.0
        # sum_h V_h = W_O W_V: the heads' values make up the layer's value-output map (rounding, 1e-14)
        total = sum(hd.V for hd in heads)
        assert np.max(np.abs(total - lw.output_weight @ lw.value_weight)) <= 1e-14 * np.max(np.abs(total))
        # the score of head h equals the network's <W_Q x, W_K y> / sqrt(dh) without biases (rounding)
        x, y = w.word_embeddings[1], w.word_embeddings[2]
        sl = slice(0, dh)
        assert abs(x @ heads[0].M @ y - (lw.query_weight[sl] @ x) @ (lw.key_weight[sl] @ y) / math.sqrt(dh)) < 1e-13
    assert E.layer_heads(w, 0, beta=2.5)[0].beta == 2.5


def test_head_schedule_has_one_layer_per_unit_time():
    w = bert_like(n_layers=3)
    s = E.head_schedule(w)
    assert isinstance(s, HeadSchedule)
    assert list(s.starts) == [0.0, 1.0, 2.0]
    for L in range(3):
        assert np.array_equal(s.heads_at(L + 0.5)[1].M, E.layer_heads(w, L)[1].M)
    assert list(E.head_schedule(w, layer_time=0.25).starts) == [0.0, 0.25, 0.5]


def test_bias_report_holds_the_bias_norms():
    w = bert_like()
    rep = E.bias_report(w)
    dh = D // H
    assert set(rep) == {"query", "key", "value", "value_through_output", "output"}
    lw = w.layers[1]
    # norms of 4-vectors: rounding only
    assert abs(rep["query"][1, 1] - np.linalg.norm(lw.query_bias[dh:])) < 1e-15
    assert abs(rep["key"][1, 0] - np.linalg.norm(lw.key_bias[:dh])) < 1e-15
    assert abs(rep["value"][0, 1] - np.linalg.norm(w.layers[0].value_bias[dh:])) < 1e-15
    assert abs(rep["output"][1] - np.linalg.norm(lw.output_bias)) < 1e-15
    drift = np.linalg.norm(lw.output_weight[:, :dh] @ lw.value_bias[:dh])
    assert abs(rep["value_through_output"][1, 0] - drift) < 1e-14
    assert rep["query"].shape == (2, H) and rep["output"].shape == (2,)


def test_weights_are_read_only_copies():
    rng = np.random.default_rng(3)
    lw = _layer(rng)
    q = np.array(lw.query_weight)
    lw2 = E.LayerWeights(**{**lw.__dict__, "query_weight": q})
    q[0, 0] = 99.0                                             # the caller's array stays writable, the copy unchanged
    assert lw2.query_weight[0, 0] != 99.0
    with pytest.raises(ValueError):
        lw2.query_weight[0, 0] = 1.0


# --------------------------------------------------------------------------------------------- refusals
def test_bad_weights_are_refused_by_name():
    w = bert_like()
    lw = w.layers[0]
    with pytest.raises(ValueError, match=r"mlp_out_weight must be a finite real array of shape \(8, 12\)"):
        E.LayerWeights(**{**lw.__dict__, "mlp_out_weight": np.zeros((8, 5))})
    with pytest.raises(ValueError, match="key_bias must be"):
        E.LayerWeights(**{**lw.__dict__, "key_bias": np.full(D, np.nan)})
    base = w.__dict__
    with pytest.raises(ValueError, match="n_heads must divide d = 8"):
        E.EncoderWeights(**{**base, "n_heads": 3})
    with pytest.raises(ValueError, match="final_norm_weight and final_norm_bias must be given both or neither"):
        E.EncoderWeights(**{**base, "final_norm_weight": np.ones(D)})
    with pytest.raises(ValueError, match=r"activation must be one of \('gelu', 'gelu_new'\); received 'relu'"):
        E.EncoderWeights(**{**base, "activation": "relu"})
    with pytest.raises(ValueError, match="norm_position must be one of"):
        E.EncoderWeights(**{**base, "norm_position": "peri"})
    with pytest.raises(ValueError, match="causal must be True or False"):
        E.EncoderWeights(**{**base, "causal": 1})
    with pytest.raises(ValueError, match="layers must be a non-empty sequence of LayerWeights"):
        E.EncoderWeights(**{**base, "layers": ()})
    with pytest.raises(ValueError, match=r"position_embeddings must be a finite real array of shape \(max_positions, 8\)"):
        E.EncoderWeights(**{**base, "position_embeddings": np.zeros((POS, D + 1))})
    wide = _layer(np.random.default_rng(0), d=4, m=6)
    with pytest.raises(ValueError, match=r"layers\[1\] must have width d = 8"):
        E.EncoderWeights(**{**base, "layers": (lw, wide)})
    with pytest.raises(ValueError, match="layer_norm_eps"):
        E.EncoderWeights(**{**base, "layer_norm_eps": 0.0})


@pytest.mark.parametrize("ids, text", [
    ([], "token_ids must be integer"), ([1.5, 2], "token_ids must be integer"), ([[1, 2]], "token_ids must be a 1-d"),
    ([1, VOCAB], r"integers in \[0, 10\]"), ([-1], "token_ids must be integer"),
    ([1] * (POS + 1), "1 to 7 \\(the model's positions\\)"), ("abc", "token_ids must be integer"),
])
def test_bad_token_ids_are_refused_by_name(ids, text):
    for fn in (E.forward, E.embed, E.attention_forward):
        with pytest.raises(ValueError, match=text):
            fn(bert_like(), ids)


def test_bad_arguments_are_refused_by_name():
    w, g = bert_like(), gpt2_like()
    with pytest.raises(ValueError, match=r"token_type_ids must be None or integers in \[0, 1\]"):
        E.forward(w, IDS, [0, 2, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="this model has no token types"):
        E.forward(g, IDS, [0] * len(IDS))
    with pytest.raises(ValueError, match=r"layer must be an integer layer index in \[0, 1\]; received 2"):
        E.layer_heads(w, 2)
    with pytest.raises(ValueError, match="beta"):
        E.layer_heads(w, 0, beta=0.0)
    with pytest.raises(ValueError, match="layer_time"):
        E.head_schedule(w, layer_time=-1.0)
    with pytest.raises(ValueError, match="weights must be an EncoderWeights; received dict"):
        E.forward({}, IDS)
    with pytest.raises(ValueError, match="biases must be True or False"):
        E.attention_forward(w, IDS, biases="no")
    with pytest.raises(ValueError, match="norm_affine must be True or False"):
        E.attention_forward(w, IDS, norm_affine=0)
