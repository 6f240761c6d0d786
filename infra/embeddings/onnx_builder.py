"""Build the sentence-embedding ONNX graph for a BERT checkpoint stored as safetensors.

The graph is ours, written with the `onnx` helper API: no torch, no exporter, no download. Its
initializers are *external data* pointing straight into `model.safetensors` (a safetensors file
is an 8-byte header length, a JSON header, then raw little-endian tensors at known offsets), so
the serialized graph stays small and the weights are read once, by onnxruntime.

    ids, mask, types -> embeddings + LayerNorm -> N x (self-attention, FFN, post-LayerNorm)
                     -> mean pooling over the mask -> L2 -> `embeddings` [batch, hidden]
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

OPSET = 17  # the first with LayerNormalization; well within what onnxruntime 1.32 runs
WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
OUTPUT_NAME = "embeddings"
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")

# The additive mask value for padded keys, as transformers uses: exp() of it is exactly 0.
_MASK_VALUE = float(np.finfo(np.float32).min)
# sentence-transformers' Pooling clamps the token count, Normalize clamps the norm.
_POOL_EPS = 1e-9
_NORM_EPS = 1e-12
_HEADER_LIMIT = 100 * 1024 * 1024  # safetensors' own cap on the JSON header


class WeightsIntegrityError(RuntimeError):
    """The model files on disk are not the ones we expect; refuse to serve embeddings."""


@dataclass(frozen=True, slots=True)
class BertConfig:
    """The few fields of a transformers `config.json` the encoder needs."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> BertConfig:
        if raw.get("model_type") != "bert":
            raise ValueError(f"expected a BERT config, got model_type={raw.get('model_type')!r}")
        if raw.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"unsupported hidden_act {raw.get('hidden_act')!r} (only exact gelu)")
        if raw.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("only absolute position embeddings are supported")
        config = cls(
            vocab_size=int(raw["vocab_size"]),
            hidden_size=int(raw["hidden_size"]),
            num_hidden_layers=int(raw["num_hidden_layers"]),
            num_attention_heads=int(raw["num_attention_heads"]),
            intermediate_size=int(raw["intermediate_size"]),
            max_position_embeddings=int(raw["max_position_embeddings"]),
            type_vocab_size=int(raw["type_vocab_size"]),
            layer_norm_eps=float(raw["layer_norm_eps"]),
        )
        if config.hidden_size % config.num_attention_heads:
            raise ValueError("hidden_size must be a multiple of num_attention_heads")
        return config

    @classmethod
    def from_file(cls, path: Path) -> BertConfig:
        return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))


@dataclass(frozen=True, slots=True)
class SafetensorsEntry:
    """Where one tensor's raw bytes sit inside a safetensors file (absolute file offsets)."""

    dtype: str
    shape: tuple[int, ...]
    offset: int
    length: int


def sha256_file(path: Path, *, chunk_size: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def verify_sha256(path: Path, expected: str) -> None:
    """Raise `WeightsIntegrityError` unless the file's sha256 is `expected`."""
    if not path.is_file():
        raise WeightsIntegrityError(f"model weights not found: {path}")
    actual = sha256_file(path)
    if actual != expected.lower():
        raise WeightsIntegrityError(
            f"sha256 mismatch for {path}: expected {expected.lower()}, got {actual}"
        )


def read_safetensors_index(path: Path) -> dict[str, SafetensorsEntry]:
    """Parse the safetensors header into absolute byte ranges, checking they fit the file."""
    file_size = path.stat().st_size
    with path.open("rb") as handle:
        (header_len,) = struct.unpack("<Q", handle.read(8))
        if header_len > min(_HEADER_LIMIT, file_size - 8):
            raise WeightsIntegrityError(f"{path}: implausible safetensors header length")
        header: dict[str, Any] = json.loads(handle.read(header_len))
    data_start = 8 + header_len
    index: dict[str, SafetensorsEntry] = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        begin, end = (int(v) for v in meta["data_offsets"])
        if not 0 <= begin <= end <= file_size - data_start:
            raise WeightsIntegrityError(f"{path}: tensor {name!r} lies outside the file")
        index[name] = SafetensorsEntry(
            dtype=str(meta["dtype"]),
            shape=tuple(int(d) for d in meta["shape"]),
            offset=data_start + begin,
            length=end - begin,
        )
    return index


def _external_initializer(
    name: str, entry: SafetensorsEntry, expected_shape: tuple[int, ...], location: str
) -> TensorProto:
    if entry.dtype != "F32":
        raise WeightsIntegrityError(f"tensor {name!r} is {entry.dtype}, expected F32")
    if entry.shape != expected_shape:
        raise WeightsIntegrityError(
            f"tensor {name!r} has shape {entry.shape}, config implies {expected_shape}"
        )
    tensor = TensorProto()
    tensor.name = name
    tensor.data_type = TensorProto.FLOAT
    tensor.dims.extend(expected_shape)
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (
        ("location", location),
        ("offset", str(entry.offset)),
        ("length", str(entry.length)),
    ):
        tensor.external_data.add(key=key, value=value)
    return tensor


class _GraphBuilder:
    """Accumulates nodes and initializers; every helper returns the name of its output."""

    def __init__(self, index: Mapping[str, SafetensorsEntry], location: str) -> None:
        self._index = index
        self._location = location
        self._constants: dict[tuple[str, tuple[float, ...]], str] = {}
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []

    def op(self, op_type: str, inputs: list[str], **attrs: Any) -> str:
        output = f"{op_type.lower()}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=output, **attrs))
        return output

    def const(self, value: np.ndarray[Any, Any]) -> str:
        """A small constant (shape, axes, scalar), shared by every node that uses the same one."""
        key = (value.dtype.str, tuple(value.reshape(-1).tolist()))
        if key not in self._constants:
            name = f"const_{len(self._constants)}"
            self.initializers.append(onnx.numpy_helper.from_array(value, name))
            self._constants[key] = name
        return self._constants[key]

    def weight(self, name: str, shape: tuple[int, ...]) -> str:
        if name not in self._index:
            raise WeightsIntegrityError(f"tensor {name!r} missing from the weights file")
        self.initializers.append(
            _external_initializer(name, self._index[name], shape, self._location)
        )
        return name

    # Dense layers run on 2-D activations [batch*seq, features] so one Gemm does the matmul with
    # the PyTorch-layout [out, in] weight (transB) and the bias, without copying a weight.
    def linear(self, x: str, prefix: str, n_in: int, n_out: int) -> str:
        w = self.weight(f"{prefix}.weight", (n_out, n_in))
        b = self.weight(f"{prefix}.bias", (n_out,))
        return self.op("Gemm", [x, w, b], transB=1)

    def layer_norm(self, x: str, prefix: str, hidden: int, eps: float) -> str:
        gamma = self.weight(f"{prefix}.weight", (hidden,))
        beta = self.weight(f"{prefix}.bias", (hidden,))
        return self.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=eps)

    def gelu(self, x: str) -> str:
        # BERT's exact form 0.5 * x * (1 + erf(x / sqrt 2)); onnxruntime fuses it into one op.
        erf = self.op("Erf", [self.op("Div", [x, self.const(_f32(math.sqrt(2.0)))])])
        half_x = self.op("Mul", [x, self.const(_f32(0.5))])
        return self.op("Mul", [half_x, self.op("Add", [erf, self.const(_f32(1.0))])])


def _f32(value: float) -> np.ndarray[Any, Any]:
    return np.array(value, dtype=np.float32)


def _i64(*values: int) -> np.ndarray[Any, Any]:
    return np.array(values, dtype=np.int64)


def _embeddings(g: _GraphBuilder, config: BertConfig, seq_len: str) -> str:
    """word[ids] + position[0:seq] + token_type[types], LayerNorm, flattened to [batch*seq, H]."""
    hidden = config.hidden_size
    word_table = g.weight("embeddings.word_embeddings.weight", (config.vocab_size, hidden))
    position_table = g.weight(
        "embeddings.position_embeddings.weight", (config.max_position_embeddings, hidden)
    )
    type_table = g.weight(
        "embeddings.token_type_embeddings.weight", (config.type_vocab_size, hidden)
    )
    words = g.op("Gather", [word_table, "input_ids"], axis=0)
    positions = g.op("Slice", [position_table, g.const(_i64(0)), seq_len, g.const(_i64(0))])
    types = g.op("Gather", [type_table, "token_type_ids"], axis=0)
    summed = g.op("Add", [g.op("Add", [words, positions]), types])
    flat = g.op("Reshape", [summed, g.const(_i64(-1, hidden))])
    return g.layer_norm(flat, "embeddings.LayerNorm", hidden, config.layer_norm_eps)


def _self_attention(
    g: _GraphBuilder, x: str, prefix: str, config: BertConfig, heads_shape: str, mask: str
) -> str:
    """softmax(Q K^T / sqrt(d) + mask) V over heads, back to [batch*seq, H] (before the output
    dense layer)."""
    hidden = config.hidden_size

    def heads(name: str, perm: list[int]) -> str:
        projected = g.linear(x, f"{prefix}.{name}", hidden, hidden)
        return g.op("Transpose", [g.op("Reshape", [projected, heads_shape])], perm=perm)

    q = heads("query", [0, 2, 1, 3])  # [batch, heads, seq, head_size]
    k = heads("key", [0, 2, 3, 1])  # [batch, heads, head_size, seq]
    v = heads("value", [0, 2, 1, 3])
    scale = g.const(_f32(1.0 / math.sqrt(config.head_size)))
    scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), scale]), mask])
    probs = g.op("Softmax", [scores], axis=-1)
    context = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    return g.op("Reshape", [context, g.const(_i64(-1, hidden))])


def _encoder_layer(
    g: _GraphBuilder, x: str, layer: int, config: BertConfig, heads_shape: str, mask: str
) -> str:
    """One post-LayerNorm BERT layer: attention + residual + LN, GELU FFN + residual + LN."""
    p, hidden, eps = f"encoder.layer.{layer}", config.hidden_size, config.layer_norm_eps
    context = _self_attention(g, x, f"{p}.attention.self", config, heads_shape, mask)
    attended = g.linear(context, f"{p}.attention.output.dense", hidden, hidden)
    x = g.layer_norm(g.op("Add", [attended, x]), f"{p}.attention.output.LayerNorm", hidden, eps)
    inner = g.gelu(g.linear(x, f"{p}.intermediate.dense", hidden, config.intermediate_size))
    ffn = g.linear(inner, f"{p}.output.dense", config.intermediate_size, hidden)
    return g.layer_norm(g.op("Add", [ffn, x]), f"{p}.output.LayerNorm", hidden, eps)


def _mean_pool_l2(g: _GraphBuilder, x: str, tokens_shape: str, mask_f: str) -> None:
    """Mean over real tokens, then L2; sentence-transformers' clamps (1e-9 count, 1e-12 norm)."""
    tokens = g.op("Reshape", [x, tokens_shape])  # [batch, seq, H]
    mask3 = g.op("Unsqueeze", [mask_f, g.const(_i64(2))])
    seq_axis = g.const(_i64(1))
    summed = g.op("ReduceSum", [g.op("Mul", [tokens, mask3]), seq_axis], keepdims=0)
    counts = g.op("ReduceSum", [mask3, seq_axis], keepdims=0)
    pooled = g.op("Div", [summed, g.op("Max", [counts, g.const(_f32(_POOL_EPS))])])
    norm = g.op("ReduceL2", [pooled], axes=[1], keepdims=1)
    norm = g.op("Max", [norm, g.const(_f32(_NORM_EPS))])
    g.nodes.append(helper.make_node("Div", [pooled, norm], [OUTPUT_NAME], name="l2_normalize"))


def build_bert_embedding_model(
    config: BertConfig, index: Mapping[str, SafetensorsEntry], *, location: str = WEIGHTS_FILE
) -> onnx.ModelProto:
    """Emit the encoder + mean pooling + L2 graph; initializers reference `location` externally."""
    g = _GraphBuilder(index, location)
    hidden = config.hidden_size

    # Dynamic shapes, computed once from input_ids: [batch, seq] and its 4-D / 3-D extensions.
    batch_seq = g.op("Shape", ["input_ids"])
    seq_len = g.op("Slice", [batch_seq, g.const(_i64(1)), g.const(_i64(2))])
    heads_shape = g.op(
        "Concat",
        [batch_seq, g.const(_i64(config.num_attention_heads, config.head_size))],
        axis=0,
    )
    tokens_shape = g.op("Concat", [batch_seq, g.const(_i64(hidden))], axis=0)

    # Additive attention mask [batch, 1, 1, seq]: 0 for tokens, float32-min for padding.
    mask_f = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    padding = g.op("Sub", [g.const(_f32(1.0)), mask_f])
    additive = g.op("Mul", [padding, g.const(_f32(_MASK_VALUE))])
    additive = g.op("Unsqueeze", [additive, g.const(_i64(1, 2))])

    x = _embeddings(g, config, seq_len)
    for layer in range(config.num_hidden_layers):
        x = _encoder_layer(g, x, layer, config, heads_shape, additive)
    _mean_pool_l2(g, x, tokens_shape, mask_f)

    dims: list[str | int] = ["batch", "sequence"]
    graph = helper.make_graph(
        g.nodes,
        "cairn_bert_sentence_embedding",
        [helper.make_tensor_value_info(name, TensorProto.INT64, dims) for name in INPUT_NAMES],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["batch", hidden])],
        initializer=g.initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="infra.embeddings",
    )
    model.ir_version = 8  # readable by every onnxruntime that has opset 17
    return model


@dataclass(frozen=True, slots=True)
class BuiltModel:
    config: BertConfig
    model_bytes: bytes


def build_from_folder(model_dir: Path, *, expected_sha256: str) -> BuiltModel:
    """Verify the weights' sha256, then build the graph from `config.json` and the header.

    The bytes reference `model.safetensors` by relative path: load them with the session config
    entry `session.model_external_initializers_file_folder_path` set to `model_dir`.
    """
    weights = model_dir / WEIGHTS_FILE
    verify_sha256(weights, expected_sha256)
    config = BertConfig.from_file(model_dir / CONFIG_FILE)
    model = build_bert_embedding_model(config, read_safetensors_index(weights))
    return BuiltModel(config=config, model_bytes=model.SerializeToString())
