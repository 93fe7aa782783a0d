r"""A trained transformer's weights, its heads as the theory's heads, and its numpy forward pass (issue 34).

:class:`EncoderWeights` holds the weights of a BERT-like encoder (post-LN, bidirectional) or of a GPT-2-like
decoder (pre-LN, causal), every matrix stored ``out x in`` (``y = W x + b``), validated on construction; it
reads no file (:mod:`meanfield.workflow.pretrained` loads checkpoints).  From it:

* :func:`layer_heads` -- the heads of one layer as factored :class:`~meanfield.core.heads.Head`\ s:
  head ``h`` with query, key, value rows ``W_Q^h, W_K^h, W_V^h`` (``d_head x d``) and output columns ``W_O^h``
  (``d x d_head``) is

  .. math::  M_h = W_Q^{h,T} W_K^h / \sqrt{d_{head}}, \qquad V_h = W_O^h W_V^h,

  given by the factors ``A = W_Q^{h,T} / sqrt(d_head)``, ``B = W_K^{h,T}``, ``C = W_O^h``, ``D = W_V^{h,T}``
  (rank ``d_head``), kernel ``exp``, normalization ``softmax``;
* :func:`head_schedule` -- a :class:`~meanfield.core.schedules.HeadSchedule`, layer ``L`` on ``[L, L+1)``
  (times scaled by ``layer_time``);
* :func:`bias_report` -- the norms of the biases the theory's heads do not have (reported, never dropped
  silently): per head the query, key and value bias blocks, per layer the output bias.  With softmax attention the
  key bias adds ``<q_i, b_K>`` to every score of query ``i`` and cancels exactly; the value bias adds the constant
  ``W_O^h b_V^h`` (the weights sum to 1); the query bias adds ``<b_Q^h, k_j>``, a score that depends on the key;
* :func:`embed`, :func:`forward` -- the network itself (attention with biases, softmax, residual, LayerNorm, the
  MLP with exact-erf GELU or GPT-2's tanh ``gelu_new``), in float64: the hidden states after the embeddings and
  after each layer, shape ``(n_layers + 1, n_tokens, d)``, as HuggingFace's ``output_hidden_states`` (for a model
  with a final norm, GPT-2's ``ln_f``, the last entry is after it);
* :func:`attention_forward` -- the first steps of the chain from the network to the theory's flow: the MLP removed
  (attention, residual and LayerNorm per layer), optionally without biases and without the LayerNorms' gain and
  shift.

Why not :mod:`meanfield.models.step_rules`: its ``post_ln`` rule is ``x <- normalize(x + dt u(x))`` for unit
tokens and a bias-free attention field (:class:`~meanfield.models.batched.BatchedSystem`, whose ``check`` refuses
rows off the sphere).  A BERT layer is ``LN(x + W_O attn(x) + b_O)``: its LayerNorm subtracts the mean of the
coordinates, scales the rows to norm ``sqrt(d)`` and applies a gain and shift per coordinate, the hidden states
are not unit vectors, and the attention carries biases.  The step rules are the end of the chain this module
starts (``attention_forward(..., biases=False, norm_affine=False)`` is ``post_ln`` up to the centering, the
``sqrt(d)`` radius and a step ``dt = 1``), so the forward pass here is written out on its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import numpy as np

from ..core import cost, validate
from ..core.heads import Head
from ..core.schedules import HeadSchedule

__all__ = ["ACTIVATIONS", "NORM_POSITIONS", "LayerWeights", "EncoderWeights", "layer_heads", "head_schedule",
           "bias_report", "embed", "forward", "attention_forward"]

ACTIVATIONS = ("gelu", "gelu_new")
"""The MLP's activation: ``gelu`` exact (``x Phi(x)`` with erf; BERT), ``gelu_new`` the tanh approximation (GPT-2)."""

NORM_POSITIONS = ("post", "pre")
"""Where the LayerNorms sit: ``post`` ``x <- LN(x + f(x))`` (BERT), ``pre`` ``x <- x + f(LN(x))`` (GPT-2)."""

_SHAPES = {"query_weight": ("d", "d"), "query_bias": ("d",), "key_weight": ("d", "d"), "key_bias": ("d",),
           "value_weight": ("d", "d"), "value_bias": ("d",), "output_weight": ("d", "d"), "output_bias": ("d",),
           "attention_norm_weight": ("d",), "attention_norm_bias": ("d",),
           "mlp_in_weight": ("m", "d"), "mlp_in_bias": ("m",), "mlp_out_weight": ("d", "m"), "mlp_out_bias": ("d",),
           "mlp_norm_weight": ("d",), "mlp_norm_bias": ("d",)}


def _frozen(name, x, shape):
    """``x`` as a read-only float64 array of ``shape`` (a copy: the caller's array stays writable)."""
    a = validate.real_array(name, x, shape)
    a = np.array(a, dtype=float, copy=True)
    a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False)
class LayerWeights:
    """One layer's weights, matrices ``out x in``: ``query/key/value/output`` (d, d) and their biases (d,); the
    LayerNorm around the attention (``attention_norm_*``: BERT's ``attention.output.LayerNorm``, GPT-2's ``ln_1``)
    and around the MLP (``mlp_norm_*``: ``output.LayerNorm``, ``ln_2``); the MLP ``mlp_in`` (m, d), ``mlp_out``
    (d, m).  Shapes are checked here (``d`` from ``query_weight``, ``m`` from ``mlp_in_weight``) and by
    :class:`EncoderWeights` against the model's ``d``.

    Parameters
    ----------
    query_weight, key_weight, value_weight, output_weight : array_like, shape (d, d)
        The attention's projections.
    query_bias, key_bias, value_bias, output_bias : array_like, shape (d,)
        Their biases.
    attention_norm_weight, attention_norm_bias : array_like, shape (d,)
        The LayerNorm around the attention.
    mlp_in_weight : array_like, shape (m, d)
    mlp_in_bias : array_like, shape (m,)
    mlp_out_weight : array_like, shape (d, m)
    mlp_out_bias : array_like, shape (d,)
    mlp_norm_weight, mlp_norm_bias : array_like, shape (d,)
        The LayerNorm around the MLP.

    Raises
    ------
    ValueError
        An array that is not real and finite or not of its shape.
    """

    query_weight: np.ndarray
    query_bias: np.ndarray
    key_weight: np.ndarray
    key_bias: np.ndarray
    value_weight: np.ndarray
    value_bias: np.ndarray
    output_weight: np.ndarray
    output_bias: np.ndarray
    attention_norm_weight: np.ndarray
    attention_norm_bias: np.ndarray
    mlp_in_weight: np.ndarray
    mlp_in_bias: np.ndarray
    mlp_out_weight: np.ndarray
    mlp_out_bias: np.ndarray
    mlp_norm_weight: np.ndarray
    mlp_norm_bias: np.ndarray

    def __post_init__(self):
        q = validate.real_array("query_weight", self.query_weight, ("d", "d"))
        mi = validate.real_array("mlp_in_weight", self.mlp_in_weight, ("m", q.shape[1]))
        sizes = {"d": q.shape[1], "m": mi.shape[0]}
        for f in fields(self):
            object.__setattr__(self, f.name, _frozen(f.name, getattr(self, f.name),
                                                     tuple(sizes[s] for s in _SHAPES[f.name])))

    @property
    def d(self) -> int:
        return self.query_weight.shape[1]


@dataclass(frozen=True, eq=False)
class EncoderWeights:
    """The weights of a transformer (float64, read-only), validated on construction.

    Parameters
    ----------
    word_embeddings : array_like, shape (vocab_size, d)
    position_embeddings : array_like, shape (max_positions, d)
    layers : sequence of LayerWeights
        One per layer, each of width ``d``.
    n_heads : int
        Heads per layer; must divide ``d`` (``d_head = d / n_heads``).
    token_type_embeddings : array_like, shape (n_types, d), optional
        BERT's segment embeddings (None: the model has none, GPT-2).
    embedding_norm_weight, embedding_norm_bias : array_like, shape (d,), optional
        The LayerNorm after the embeddings (BERT); both or neither.
    final_norm_weight, final_norm_bias : array_like, shape (d,), optional
        The LayerNorm after the last layer (GPT-2's ``ln_f``); both or neither.
    layer_norm_eps : float
        The LayerNorms' ``eps`` (positive).
    activation : str
        One of :data:`ACTIVATIONS`.
    causal : bool
        Each token attends to itself and the tokens before it only.
    norm_position : str
        One of :data:`NORM_POSITIONS`.
    source : str
        Where the weights came from (a folder; set by the loader, used in messages and by the tokenizer).

    Raises
    ------
    ValueError
        A field of the wrong type or shape (its name, the shape expected and the one received), non-finite
        weights, ``n_heads`` not dividing ``d``, a LayerNorm given half, an unknown ``activation`` or
        ``norm_position`` (the allowed names listed).
    """

    word_embeddings: np.ndarray
    position_embeddings: np.ndarray
    layers: tuple
    n_heads: int
    token_type_embeddings: np.ndarray | None = None
    embedding_norm_weight: np.ndarray | None = None
    embedding_norm_bias: np.ndarray | None = None
    final_norm_weight: np.ndarray | None = None
    final_norm_bias: np.ndarray | None = None
    layer_norm_eps: float = 1e-12
    activation: str = "gelu"
    causal: bool = False
    norm_position: str = "post"
    source: str = field(default="")

    def __post_init__(self):
        wte = _frozen("word_embeddings", self.word_embeddings, ("vocab_size", "d"))
        d = wte.shape[1]
        set_ = lambda k, v: object.__setattr__(self, k, v)          # noqa: E731
        set_("word_embeddings", wte)
        set_("position_embeddings", _frozen("position_embeddings", self.position_embeddings, ("max_positions", d)))
        if self.token_type_embeddings is not None:
            set_("token_type_embeddings", _frozen("token_type_embeddings", self.token_type_embeddings, ("n_types", d)))
        for which in ("embedding_norm", "final_norm"):
            w, b = getattr(self, which + "_weight"), getattr(self, which + "_bias")
            if (w is None) != (b is None):
                raise ValueError(f"{which}_weight and {which}_bias must be given both or neither (a LayerNorm has a "
                                 f"gain and a shift); received {which}_weight {'None' if w is None else 'an array'} "
                                 f"and {which}_bias {'None' if b is None else 'an array'}")
            if w is not None:
                set_(which + "_weight", _frozen(which + "_weight", w, (d,)))
                set_(which + "_bias", _frozen(which + "_bias", b, (d,)))
        layers = self.layers
        if not isinstance(layers, (tuple, list)) or not layers or not all(isinstance(x, LayerWeights) for x in layers):
            raise ValueError(f"layers must be a non-empty sequence of LayerWeights; received {layers!r:.200}")
        for i, layer in enumerate(layers):
            if layer.d != d:
                raise ValueError(f"layers[{i}] must have width d = {d} like word_embeddings (shape "
                                 f"{wte.shape}); received query_weight of shape {layer.query_weight.shape}")
        set_("layers", tuple(layers))
        n_heads = validate.integer("n_heads", self.n_heads, 1)
        if d % n_heads:
            raise ValueError(f"n_heads must divide d = {d} (d_head = d / n_heads); received n_heads = {n_heads}")
        set_("n_heads", n_heads)
        set_("layer_norm_eps", validate.real("layer_norm_eps", self.layer_norm_eps, positive=True))
        validate.choice("activation", self.activation, ACTIVATIONS)
        set_("causal", validate.boolean("causal", self.causal))
        validate.choice("norm_position", self.norm_position, NORM_POSITIONS)
        if not isinstance(self.source, str):
            raise ValueError(f"source must be a string (a folder or a description); received {self.source!r:.100}")

    @property
    def d(self) -> int:
        """Width of the hidden states."""
        return self.word_embeddings.shape[1]

    @property
    def d_head(self) -> int:
        return self.d // self.n_heads

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def max_positions(self) -> int:
        """The longest token sequence the position embeddings cover."""
        return self.position_embeddings.shape[0]

    @property
    def vocab_size(self) -> int:
        return self.word_embeddings.shape[0]

    def label(self) -> str:
        """One line: layers, heads, widths, norm position, mask, activation and source.

        Returns
        -------
        str
        """
        return (f"{self.n_layers} layers, {self.n_heads} heads, d = {self.d}, d_head = {self.d_head}, "
                f"{self.norm_position}-LN, {'causal' if self.causal else 'bidirectional'}, {self.activation}"
                + (f" ({self.source})" if self.source else ""))


def _check_weights(weights):
    if not isinstance(weights, EncoderWeights):
        raise ValueError(f"weights must be an EncoderWeights; received {type(weights).__name__}")
    return weights


def _check_layer(weights, layer):
    return validate.integer("layer", layer, 0, weights.n_layers - 1,
                            what=f"an integer layer index in [0, {weights.n_layers - 1}]")


def _blocks(weights, layer):
    """Per-head blocks ``(W_Q^h, W_K^h, W_V^h, W_O^h)``: rows ``h d_head:(h+1) d_head`` of the query, key and value
    weights (d_head, d) and the same columns of the output weight (d, d_head)."""
    L, dh = weights.layers[layer], weights.d_head
    return [(L.query_weight[h * dh:(h + 1) * dh], L.key_weight[h * dh:(h + 1) * dh],
             L.value_weight[h * dh:(h + 1) * dh], L.output_weight[:, h * dh:(h + 1) * dh])
            for h in range(weights.n_heads)]


def layer_heads(weights, layer, beta=1.0) -> tuple:
    r"""The heads of one layer as factored heads (``M_h = W_Q^{h,T} W_K^h / sqrt(d_head)``, ``V_h = W_O^h W_V^h``).

    Parameters
    ----------
    weights : EncoderWeights
    layer : int
        Layer index, ``0 <= layer < n_layers``.
    beta : float
        The heads' inverse temperature (1: the network's own scores ``<W_Q x, W_K y> / sqrt(d_head)``).

    Returns
    -------
    tuple of Head
        ``n_heads`` heads of dimension ``d``, factors of rank ``(d_head, d_head)``, kernel ``exp``,
        normalization ``softmax``.  The biases are not part of them (:func:`bias_report`).

    Raises
    ------
    ValueError
        ``weights`` not an :class:`EncoderWeights`, ``layer`` out of range, ``beta`` not positive.
    """
    _check_weights(weights)
    layer = _check_layer(weights, layer)
    beta = validate.real("beta", beta, positive=True)
    scale = 1.0 / math.sqrt(weights.d_head)
    return tuple(Head.from_factors(q.T * scale, k.T, o, v.T, beta=beta, kernel="exp", normalization="softmax")
                 for q, k, v, o in _blocks(weights, layer))


def head_schedule(weights, beta=1.0, layer_time=1.0) -> HeadSchedule:
    """The layers' heads as a schedule: layer ``L`` in force on ``[L layer_time, (L + 1) layer_time)``.

    Parameters
    ----------
    weights : EncoderWeights
    beta : float
        As for :func:`layer_heads`.
    layer_time : float
        Time per layer (positive).

    Returns
    -------
    HeadSchedule
        ``n_layers`` entries of ``n_heads`` factored heads each.

    Raises
    ------
    ValueError
        As :func:`layer_heads`; ``layer_time`` not positive.
    """
    _check_weights(weights)
    layer_time = validate.real("layer_time", layer_time, positive=True)
    return HeadSchedule(tuple((L * layer_time, layer_heads(weights, L, beta)) for L in range(weights.n_layers)))


def bias_report(weights) -> dict:
    """Euclidean norms of the biases the theory's heads leave out (see the module docstring for what each does).

    Parameters
    ----------
    weights : EncoderWeights

    Returns
    -------
    dict of ndarray
        ``query``, ``key``, ``value``: shape (n_layers, n_heads), the norm of each head's bias block;
        ``output``: shape (n_layers,), the output bias; ``value_through_output``: (n_layers, n_heads),
        ``|W_O^h b_V^h|``, the constant drift a head's value bias adds to every token.

    Raises
    ------
    ValueError
        ``weights`` not an :class:`EncoderWeights`.
    """
    _check_weights(weights)
    dh, H = weights.d_head, weights.n_heads
    out = {k: np.zeros((weights.n_layers, H)) for k in ("query", "key", "value", "value_through_output")}
    out["output"] = np.zeros(weights.n_layers)
    for L, lw in enumerate(weights.layers):
        for name in ("query", "key", "value"):
            out[name][L] = np.linalg.norm(getattr(lw, name + "_bias").reshape(H, dh), axis=1)
        for h in range(H):
            out["value_through_output"][L, h] = np.linalg.norm(lw.output_weight[:, h * dh:(h + 1) * dh]
                                                               @ lw.value_bias[h * dh:(h + 1) * dh])
        out["output"][L] = np.linalg.norm(lw.output_bias)
    return out


def _token_ids(weights, token_ids, token_type_ids):
    ids = validate.integer_array("token_ids", token_ids, 0)
    if ids.ndim != 1 or not 1 <= ids.size <= weights.max_positions or np.any(ids >= weights.vocab_size):
        raise ValueError(f"token_ids must be a 1-d sequence of 1 to {weights.max_positions} (the model's positions) "
                         f"integers in [0, {weights.vocab_size - 1}]; received shape {ids.shape}, values in "
                         f"[{ids.min()}, {ids.max()}]")
    if token_type_ids is None:
        return ids, np.zeros_like(ids)
    n_types = 0 if weights.token_type_embeddings is None else weights.token_type_embeddings.shape[0]
    types = validate.integer_array("token_type_ids", token_type_ids, 0)
    if n_types == 0 or types.shape != ids.shape or np.any(types >= n_types):
        raise ValueError(f"token_type_ids must be None or integers in [0, {n_types - 1}] of the shape of token_ids "
                         f"{ids.shape}" + (" (this model has no token types: None only)" if n_types == 0 else "")
                         + f"; received shape {types.shape}, values in [{types.min()}, {types.max()}]")
    return ids, types


def _layer_norm(x, g, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    return y if g is None else y * g + b


_ERF = np.frompyfunc(math.erf, 1, 1)


def _gelu(x, activation):
    if activation == "gelu":                            # exact: x Phi(x), erf to double precision (math.erf)
        return 0.5 * x * (1.0 + _ERF(x / math.sqrt(2.0)).astype(float))
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _attention(weights, lw, x, biases):
    """Multi-head softmax attention of hidden states ``x`` (n, d) with the output dense layer: (n, d)."""
    n, H, dh = x.shape[0], weights.n_heads, weights.d_head
    b = (lambda v: v) if biases else (lambda v: 0.0)
    q = (x @ lw.query_weight.T + b(lw.query_bias)).reshape(n, H, dh).transpose(1, 0, 2)
    k = (x @ lw.key_weight.T + b(lw.key_bias)).reshape(n, H, dh).transpose(1, 0, 2)
    v = (x @ lw.value_weight.T + b(lw.value_bias)).reshape(n, H, dh).transpose(1, 0, 2)
    s = q @ k.transpose(0, 2, 1) / math.sqrt(dh)                       # (H, n, n)
    if weights.causal:
        s = np.where(np.tri(n, dtype=bool), s, -np.inf)                 # token i sees j <= i
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    ctx = (p @ v).transpose(1, 0, 2).reshape(n, H * dh)
    return ctx @ lw.output_weight.T + b(lw.output_bias)


def _mlp(weights, lw, x):
    return _gelu(x @ lw.mlp_in_weight.T + lw.mlp_in_bias, weights.activation) @ lw.mlp_out_weight.T + lw.mlp_out_bias


def embed(weights, token_ids, token_type_ids=None) -> np.ndarray:
    """The embeddings of a token sequence: word + position (+ token type), then the embedding LayerNorm if any.

    Parameters
    ----------
    weights : EncoderWeights
    token_ids : array_like of int, shape (n,)
        ``1 <= n <= max_positions``, each id in ``[0, vocab_size)``.
    token_type_ids : array_like of int, shape (n,), optional
        Segment ids (None: all 0; a model without token types takes None only).

    Returns
    -------
    ndarray, shape (n, d), float64

    Raises
    ------
    ValueError
        ``weights`` not an :class:`EncoderWeights`; ids that are not integers, out of range, empty or longer
        than the model's positions (never truncated).
    """
    _check_weights(weights)
    ids, types = _token_ids(weights, token_ids, token_type_ids)
    return _embed(weights, ids, types)


def _embed(weights, ids, types):
    x = weights.word_embeddings[ids] + weights.position_embeddings[:ids.size]
    if weights.token_type_embeddings is not None:
        x = x + weights.token_type_embeddings[types]
    if weights.embedding_norm_weight is not None:
        x = _layer_norm(x, weights.embedding_norm_weight, weights.embedding_norm_bias, weights.layer_norm_eps)
    return x


def estimate_forward(weights, n_tokens) -> cost.Cost:
    """Memory and time of :func:`forward` on ``n_tokens`` tokens (sizes only): the scores (n_heads, n, n) and
    the MLP's (n, m) activations a few times over, the hidden states (n_layers + 1, n, d)."""
    n, d, H, L = n_tokens, weights.d, weights.n_heads, weights.n_layers
    m = weights.layers[0].mlp_in_weight.shape[0]
    mem = 8.0 * (4 * H * n * n + 4 * n * m + (L + 8) * n * d)
    flops = L * (8.0 * n * d * d + 4.0 * n * n * d + 4.0 * n * d * m)
    return cost.Cost(f"forward of {n} tokens through {weights.label()}", mem, flops / 1e9 + 1e-6 * L * n * m,
                     f"{flops:.3g} flops")


def _run(weights, token_ids, token_type_ids, *, mlp, biases, norm_affine):
    _check_weights(weights)
    ids, types = _token_ids(weights, token_ids, token_type_ids)
    estimate_forward(weights, ids.size).check("fewer tokens")
    eps = weights.layer_norm_eps
    x = _embed(weights, ids, types)
    states = [x]
    for lw in weights.layers:
        g1, b1 = (lw.attention_norm_weight, lw.attention_norm_bias) if norm_affine else (None, None)
        g2, b2 = (lw.mlp_norm_weight, lw.mlp_norm_bias) if norm_affine else (None, None)
        if weights.norm_position == "post":
            x = _layer_norm(x + _attention(weights, lw, x, biases), g1, b1, eps)
            if mlp:
                x = _layer_norm(x + _mlp(weights, lw, x), g2, b2, eps)
        else:
            x = x + _attention(weights, lw, _layer_norm(x, g1, b1, eps), biases)
            if mlp:
                x = x + _mlp(weights, lw, _layer_norm(x, g2, b2, eps))
        states.append(x)
    if weights.final_norm_weight is not None:           # as HuggingFace: the last hidden state after ln_f
        g, b = (weights.final_norm_weight, weights.final_norm_bias) if norm_affine else (None, None)
        states[-1] = _layer_norm(states[-1], g, b, eps)
    return np.stack(states)


def forward(weights, token_ids, token_type_ids=None) -> np.ndarray:
    """The network's hidden states (float64): after the embeddings and after each layer.

    Post-LN (BERT): ``x <- LN_1(x + attn(x))``, ``x <- LN_2(x + mlp(x))``; pre-LN (GPT-2):
    ``x <- x + attn(LN_1(x))``, ``x <- x + mlp(LN_2(x))``, and the final LayerNorm applied to the last state.
    ``attn`` is multi-head softmax attention with the query, key, value and output biases (causal when
    ``weights.causal``), ``mlp`` two dense layers around :data:`ACTIVATIONS` ``weights.activation``.

    Parameters
    ----------
    weights : EncoderWeights
    token_ids, token_type_ids
        As for :func:`embed`.

    Returns
    -------
    ndarray, shape (n_layers + 1, n, d), float64
        HuggingFace's ``output_hidden_states`` of one unpadded sequence.

    Raises
    ------
    ValueError
        As :func:`embed`; a sequence whose cost the guard refuses.
    """
    return _run(weights, token_ids, token_type_ids, mlp=True, biases=True, norm_affine=True)


def attention_forward(weights, token_ids, token_type_ids=None, *, biases=True, norm_affine=True) -> np.ndarray:
    """The network without its MLPs: attention, residual and LayerNorm per layer (the embeddings as in
    :func:`forward`, always with their own LayerNorm).

    Parameters
    ----------
    weights : EncoderWeights
    token_ids, token_type_ids
        As for :func:`embed`.
    biases : bool
        Keep the query, key, value and output biases (False: the heads of :func:`layer_heads` alone).
    norm_affine : bool
        Keep the layers' LayerNorm gains and shifts (False: ``LN(x) = (x - mean) / std``, rows of norm
        ``sqrt(d)`` up to ``eps``).

    Returns
    -------
    ndarray, shape (n_layers + 1, n, d), float64

    Raises
    ------
    ValueError
        As :func:`forward`; ``biases`` or ``norm_affine`` not a bool.
    """
    biases = validate.boolean("biases", biases)
    norm_affine = validate.boolean("norm_affine", norm_affine)
    return _run(weights, token_ids, token_type_ids, mlp=False, biases=biases, norm_affine=norm_affine)
