"""Sentence embeddings on onnxruntime, from a graph we build ourselves (no torch, no downloads)."""

from infra.embeddings.embedder import (
    DEFAULT_MODEL_NAME,
    MINILM_L6_V2_SHA256,
    OnnxEmbedder,
    bundled_model_dir,
)
from infra.embeddings.onnx_builder import WeightsIntegrityError

__all__ = [
    "DEFAULT_MODEL_NAME",
    "MINILM_L6_V2_SHA256",
    "OnnxEmbedder",
    "WeightsIntegrityError",
    "bundled_model_dir",
]
