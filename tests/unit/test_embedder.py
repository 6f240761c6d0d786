"""The embedding model: our ONNX graph against an independent numpy BERT, and the embedder."""

from __future__ import annotations

import math
import shutil
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from infra.embeddings import (
    MINILM_L6_V2_SHA256,
    OnnxEmbedder,
    WeightsIntegrityError,
    bundled_model_dir,
)
from infra.embeddings.onnx_builder import BertConfig, sha256_file, verify_sha256
from schemas.kernel.embedding_text import entry_embedding_text

F64 = NDArray[np.float64]
_erf = np.vectorize(math.erf, otypes=[np.float64])

TEXTS = [
    "hello world",
    "The cat sits on the mat",
    "Agents keep a diary of what they learned; the server signs nothing on their behalf.",
    "",
    "Ünïcödé, punctuation!? and numbers 12345 — all in one line.",
    " ".join(["long"] * 40),
    " ".join(f"token{i}" for i in range(200)),  # truncated to 256 tokens by both sides
]


@pytest.fixture(scope="module")
def model_dir() -> Path:
    return bundled_model_dir()


@pytest.fixture(scope="module")
def embedder(model_dir: Path) -> OnnxEmbedder:
    return OnnxEmbedder.load(model_dir, threads=2)


# --- an independent forward pass: plain numpy in float64, straight from the safetensors file ---


def _layer_norm(x: F64, gamma: F64, beta: F64, eps: float) -> F64:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    normed: F64 = (x - mean) / np.sqrt(var + eps) * gamma + beta
    return normed


def _numpy_sentence_embedding(w: Mapping[str, F64], config: BertConfig, ids: list[int]) -> F64:
    """One unpadded text through BERT, mean pooling and L2, as sentence-transformers does it."""
    n, heads, d = len(ids), config.num_attention_heads, config.head_size
    eps = config.layer_norm_eps

    def dense(x: F64, name: str) -> F64:
        return x @ w[f"{name}.weight"].T + w[f"{name}.bias"]

    def norm(x: F64, name: str) -> F64:
        return _layer_norm(x, w[f"{name}.weight"], w[f"{name}.bias"], eps)

    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:n]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = norm(x, "embeddings.LayerNorm")
    for layer in range(config.num_hidden_layers):
        p = f"encoder.layer.{layer}"
        q, k, v = (
            dense(x, f"{p}.attention.self.{name}").reshape(n, heads, d).transpose(1, 0, 2)
            for name in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(d)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs = scores / scores.sum(axis=-1, keepdims=True)
        context = (probs @ v).transpose(1, 0, 2).reshape(n, heads * d)
        x = norm(
            dense(context, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm"
        )
        inner = dense(x, f"{p}.intermediate.dense")
        inner = 0.5 * inner * (1.0 + _erf(inner / np.sqrt(2.0)))
        x = norm(dense(inner, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
    pooled = x.mean(axis=0)
    result: F64 = pooled / np.linalg.norm(pooled)
    return result


def test_onnx_graph_matches_numpy_forward_pass(embedder: OnnxEmbedder, model_dir: Path) -> None:
    weights = {
        name: value.astype(np.float64)
        for name, value in load_file(str(model_dir / "model.safetensors")).items()
        if name != "embeddings.position_ids"
    }
    config = BertConfig.from_file(model_dir / "config.json")
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=256)
    expected = np.stack(
        [_numpy_sentence_embedding(weights, config, tokenizer.encode(t).ids) for t in TEXTS]
    )

    batched = embedder.embed(TEXTS)  # one padded batch: lengths 2 .. 256 tokens
    one_by_one = np.stack([embedder.embed_one(t) for t in TEXTS])  # no padding at all

    assert np.abs(batched - expected).max() <= 1e-5
    assert np.abs(one_by_one - expected).max() <= 1e-5


# --- behaviour of the embedder ---


def test_similar_sentences_are_closer(embedder: OnnxEmbedder) -> None:
    cat, kitten, revenue = embedder.embed(
        [
            "The cat sits on the mat",
            "A kitten is resting on a rug",
            "Quarterly revenue grew by 8 percent",
        ]
    )
    assert float(cat @ kitten) > float(cat @ revenue) + 0.3


def test_shape_norm_and_order_survive_sorted_batching(embedder: OnnxEmbedder) -> None:
    texts = [f"note {i}: " + "word " * ((i * 7) % 23) for i in range(40)]  # 3 batches of 16
    vectors = embedder.embed(texts)

    assert vectors.shape == (40, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    for i in (0, 13, 39):
        np.testing.assert_allclose(vectors[i], embedder.embed_one(texts[i]), atol=1e-5)


def test_long_text_is_truncated_to_max_length(embedder: OnnxEmbedder) -> None:
    long_text = " ".join(f"token{i}" for i in range(400))  # well over 256 word pieces
    vector = embedder.embed_one(long_text)
    assert vector.shape == (384,)
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
    # What is past the limit does not matter.
    np.testing.assert_allclose(vector, embedder.embed_one(long_text + " trailing words"), atol=1e-6)


def test_empty_input_gives_an_empty_matrix(embedder: OnnxEmbedder) -> None:
    vectors = embedder.embed([])
    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32


def test_a_bare_string_is_not_taken_for_a_list_of_characters(embedder: OnnxEmbedder) -> None:
    with pytest.raises(TypeError):
        embedder.embed("hello")


def test_properties(embedder: OnnxEmbedder) -> None:
    assert embedder.dimension == 384
    assert embedder.model_name == "sentence-transformers/all-MiniLM-L6-v2"
    assert embedder.max_length == 256


def test_settings_the_model_cannot_honour_are_rejected(model_dir: Path) -> None:
    with pytest.raises(ValueError, match="dimension"):
        OnnxEmbedder.load(model_dir, dimension=768)
    with pytest.raises(ValueError, match="max_length"):
        OnnxEmbedder.load(model_dir, max_length=1024)


# --- integrity of the weights ---


def test_sha256_of_the_bundled_weights(model_dir: Path) -> None:
    verify_sha256(model_dir / "model.safetensors", MINILM_L6_V2_SHA256)


def test_sha256_check_rejects_a_tampered_file(tmp_path: Path) -> None:
    original = tmp_path / "weights.bin"
    original.write_bytes(b"\x00" * 4096)
    digest = sha256_file(original)
    verify_sha256(original, digest)

    original.write_bytes(b"\x00" * 4095 + b"\x01")
    with pytest.raises(WeightsIntegrityError, match="sha256 mismatch"):
        verify_sha256(original, digest)
    with pytest.raises(WeightsIntegrityError, match="not found"):
        verify_sha256(tmp_path / "missing.bin", digest)


def test_load_refuses_a_model_folder_with_altered_weights(model_dir: Path, tmp_path: Path) -> None:
    tampered = tmp_path / "model"
    shutil.copytree(model_dir, tampered)
    weights = tampered / "model.safetensors"
    with weights.open("r+b") as handle:  # flip one byte inside the last tensor's data
        handle.seek(-4, 2)
        byte = handle.read(1)
        handle.seek(-4, 2)
        handle.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(WeightsIntegrityError, match="sha256 mismatch"):
        OnnxEmbedder.load(tampered)


# --- the text an entry is embedded from ---


@pytest.mark.parametrize(
    ("title", "content", "tags", "expected"),
    [
        ("Title", "Body", ["a", "b c"], "Title\nBody\ntag:a\ntag:b c"),
        (None, "Body", ["x"], "Body\ntag:x"),
        ("", "Body", [], "Body"),
        ("   ", "Body", (), "Body"),
        ("T", "line 1\nline 2", [], "T\nline 1\nline 2"),
    ],
)
def test_entry_embedding_text(
    title: str | None, content: str, tags: list[str], expected: str
) -> None:
    assert entry_embedding_text(title, content, tags) == expected
