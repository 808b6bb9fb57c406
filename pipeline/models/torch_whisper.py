"""Whisper in plain torch for the CPU: transformers' modules, names and arithmetic, without its modeling stack.

Why: importing transformers' ``WhisperForConditionalGeneration`` imports its weight loader (which imports
``torch.distributed.tensor``), its masking utilities (``torch._dynamo``) and ``generate``: 3.4 s of a 9 s
``podscribe transcribe`` of a 1 s file on a 2-core CPU (2026-12-06, docs/benchmarks.md "Start-up"), paid by every
process that loads a model: a run, each ``--workers`` child, each isolated suspect. podscribe's decoding loop
(``decode/kv_cache.py``) already reads nothing but the weights; what the default path still ran of transformers
was the encoder and the teacher-forced decoder pass (``decode/forced.py``: scoring, word timings, language
detection). Both are here, op for op as transformers (5.2x, sdpa) computes them: the query scaled before the
product, sdpa with scale 1, ``is_causal`` for the decoder's own positions and no mask, positions added before the
first layer. ``tests/test_torch_whisper.py`` compares the encoder's and the pass's bits with transformers' in
float32, bfloat16 and int8, and a whole file's tokens.

Modules and parameter names are transformers' (``model.encoder.layers.0.self_attn.q_proj``...), so
``model.safetensors`` loads as it is, ``backend/quantize.py`` finds the same linear layers, and the layout
checks of ``backend/hf_internals/attention.py`` hold. What still needs transformers — the second chances'
beam search and sampling (its ``generate``), the ASR-pipeline engine, drafts made from the main decoder — gets
``backend/hf_internals/twin.py``'s ``as_transformers(model)``: a transformers model built around these very leaf
modules (no weight copied, int8 layers included), imported at its first need.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn

WEIGHTS = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"
# ``WhisperConfig``'s defaults for what a ``config.json`` may leave out (transformers writes only what differs from
# them); ``GenerationConfig``'s for the fields podscribe reads. tests/test_torch_whisper.py checks both against
# transformers' classes.
CONFIG_DEFAULTS = {
    "model_type": "whisper",
    "vocab_size": 51865,
    "num_mel_bins": 80,
    "encoder_layers": 4,
    "encoder_attention_heads": 6,
    "decoder_layers": 4,
    "decoder_attention_heads": 6,
    "decoder_ffn_dim": 1536,
    "encoder_ffn_dim": 1536,
    "d_model": 384,
    "max_source_positions": 1500,
    "max_target_positions": 448,
    "pad_token_id": 50256,
    "bos_token_id": 50256,
    "eos_token_id": 50256,
    "decoder_start_token_id": 50257,
    "activation_function": "gelu",
    "scale_embedding": False,
    "tie_word_embeddings": True,
    "is_encoder_decoder": True,
}
GENERATION_DEFAULTS = dict.fromkeys(
    (
        "max_length",
        "suppress_tokens",
        "begin_suppress_tokens",
        "pad_token_id",
        "eos_token_id",
        "bos_token_id",
        "decoder_start_token_id",
    )
)


class Settings(SimpleNamespace):
    """A model's ``config.json`` or ``generation_config.json`` as attributes over transformers' defaults: what
    podscribe reads of them, without importing transformers' configuration classes (``import transformers`` alone
    is ~0.8 s of a start-up). ``backend/hf_internals/twin.py`` turns them into transformers' own."""

    @classmethod
    def read(cls, path: Path, defaults: dict) -> Settings:
        return cls(**{**defaults, **json.loads(path.read_text())})

    def to_dict(self) -> dict:
        return dict(vars(self))


@dataclass
class Output:
    """What transformers' encoder and decoder return, as far as podscribe reads it."""

    last_hidden_state: torch.Tensor


def _embedding(rows: int, width: int, padding_idx: int | None = None) -> nn.Embedding:
    """An embedding whose weight is left uninitialised (the checkpoint's comes next): on the meta device torch
    initialises one through its Python reference kernels, which import ``torch._dynamo`` (0.9 s at start-up)."""
    return nn.Embedding(rows, width, padding_idx, _weight=torch.empty(rows, width))


class Attention(nn.Module):
    """transformers' ``WhisperAttention`` on the sdpa path, without a cache object."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.num_heads, self.head_dim = heads, width // heads
        self.scaling = self.head_dim**-0.5
        self.k_proj = nn.Linear(width, width, bias=False)
        self.v_proj = nn.Linear(width, width)
        self.q_proj = nn.Linear(width, width)
        self.out_proj = nn.Linear(width, width)

    def _heads(self, x: torch.Tensor, rows: int) -> torch.Tensor:
        return x.view(rows, -1, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        keys_values: tuple[torch.Tensor, torch.Tensor] | None = None,
        causal: bool = False,
    ) -> torch.Tensor:
        """``keys_values``: this layer's cross-attention keys and values projected already (a ``CrossKV``'s);
        else they are projected from ``key_value_states`` (cross-attention) or ``hidden_states``."""
        rows, length = hidden_states.shape[:2]
        query = self._heads(self.q_proj(hidden_states) * self.scaling, rows)
        if keys_values is None:
            source = hidden_states if key_value_states is None else key_value_states
            keys_values = self._heads(self.k_proj(source), rows), self._heads(self.v_proj(source), rows)
        keys, values = keys_values
        out = F.scaled_dot_product_attention(
            query, keys, values, attn_mask=None, dropout_p=0.0, scale=1.0, is_causal=causal and length > 1
        )
        out = out.transpose(1, 2).contiguous().reshape(rows, length, -1).contiguous()
        return self.out_proj(out)


class EncoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        width = config.d_model
        self.self_attn = Attention(width, config.encoder_attention_heads)
        self.self_attn_layer_norm = nn.LayerNorm(width)
        self.activation_fn = nn.GELU()
        self.fc1 = nn.Linear(width, config.encoder_ffn_dim)
        self.fc2 = nn.Linear(config.encoder_ffn_dim, width)
        self.final_layer_norm = nn.LayerNorm(width)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = hidden_states + self.self_attn(self.self_attn_layer_norm(hidden_states))
        residual = hidden_states
        hidden_states = self.fc2(self.activation_fn(self.fc1(self.final_layer_norm(hidden_states))))
        hidden_states = residual + hidden_states
        if hidden_states.dtype == torch.float16:  # as transformers clamps
            bound = torch.finfo(hidden_states.dtype).max - 1000
            hidden_states = torch.clamp(hidden_states, min=-bound, max=bound)
        return hidden_states


class Encoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        width = config.d_model
        self.conv1 = nn.Conv1d(config.num_mel_bins, width, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(width, width, kernel_size=3, stride=2, padding=1)
        self.embed_positions = _embedding(config.max_source_positions, width)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.encoder_layers))
        self.layer_norm = nn.LayerNorm(width)

    def forward(self, input_features: torch.Tensor) -> Output:
        frames = self.embed_positions.num_embeddings * self.conv1.stride[0] * self.conv2.stride[0]
        if input_features.shape[-1] != frames:
            raise ValueError(f"Whisper's encoder takes {frames} feature frames, got {input_features.shape[-1]}")
        embedded = F.gelu(self.conv2(F.gelu(self.conv1(input_features)))).permute(0, 2, 1)
        # transformers adds the positions to the permuted (strided) view; made contiguous here, as podscribe's
        # hook does to transformers' encoder (backend/hf_internals/encoder.py): the same bits, a faster stream
        hidden_states = (embedded + self.embed_positions.weight).contiguous()
        for layer in self.layers:
            hidden_states = layer(hidden_states)
        return Output(self.layer_norm(hidden_states))


class DecoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        width, heads = config.d_model, config.decoder_attention_heads
        self.self_attn = Attention(width, heads)
        self.self_attn_layer_norm = nn.LayerNorm(width)
        self.encoder_attn = Attention(width, heads)
        self.encoder_attn_layer_norm = nn.LayerNorm(width)
        self.activation_fn = nn.GELU()
        self.fc1 = nn.Linear(width, config.decoder_ffn_dim)
        self.fc2 = nn.Linear(config.decoder_ffn_dim, width)
        self.final_layer_norm = nn.LayerNorm(width)

    def forward(self, hidden_states, encoder_hidden_states=None, keys_values=None) -> torch.Tensor:
        hidden_states = hidden_states + self.self_attn(self.self_attn_layer_norm(hidden_states), causal=True)
        if encoder_hidden_states is not None or keys_values is not None:
            normed = self.encoder_attn_layer_norm(hidden_states)
            hidden_states = hidden_states + self.encoder_attn(normed, encoder_hidden_states, keys_values)
        residual = hidden_states
        hidden_states = self.fc2(self.activation_fn(self.fc1(self.final_layer_norm(hidden_states))))
        return residual + hidden_states


class Decoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        width = config.d_model
        self.embed_tokens = _embedding(config.vocab_size, width, config.pad_token_id)
        self.embed_positions = _embedding(config.max_target_positions, width)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.decoder_layers))
        self.layer_norm = nn.LayerNorm(width)

    def forward(self, input_ids: torch.Tensor, encoder_hidden_states=None, cross=None) -> Output:
        """The teacher-forced pass over whole rows from position 0: ``cross`` a ``CrossKV`` (decode/kv_cache.py)
        whose keys and values are read as they are, else projected from ``encoder_hidden_states``."""
        rows, length = input_ids.shape
        positions = torch.arange(length, device=input_ids.device).unsqueeze(0).repeat(rows, 1)
        hidden_states = self.embed_tokens(input_ids) + self.embed_positions.weight[positions]
        for i, layer in enumerate(self.layers):
            keys_values = None if cross is None else (cross.keys[i], cross.values[i])
            hidden_states = layer(hidden_states, encoder_hidden_states, keys_values)
        return Output(self.layer_norm(hidden_states))


class TorchWhisper(nn.Module):
    """``WhisperForConditionalGeneration``'s layout: ``model.encoder``, ``model.decoder``, ``proj_out`` (tied to
    the token embeddings), ``config`` and ``generation_config`` (``Settings`` read from the model's files)."""

    def __init__(self, config, generation_config):
        super().__init__()
        self.config, self.generation_config = config, generation_config
        self.model = nn.Module()
        self.model.encoder = Encoder(config)
        self.model.decoder = Decoder(config)
        self.proj_out = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.proj_out.weight = self.model.decoder.embed_tokens.weight

    def get_encoder(self) -> Encoder:
        return self.model.encoder

    def get_decoder(self) -> Decoder:
        return self.model.decoder

    @property
    def dtype(self) -> torch.dtype:
        return self.model.decoder.embed_tokens.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.model.decoder.embed_tokens.weight.device


def loadable(location: str | Path, config: dict) -> bool:
    """Whether ``location`` holds a checkpoint this module computes as transformers would: a local directory
    with safetensors weights and a generation config of a plain Whisper (exact GELU, unscaled embeddings, tied
    output projection)."""
    path = Path(location)
    files = (path / WEIGHTS).is_file() or (path / WEIGHTS_INDEX).is_file()
    files = files and (path / "generation_config.json").is_file()
    plain = (
        config.get("model_type") == "whisper"
        and config.get("activation_function", "gelu") == "gelu"
        and config.get("tie_word_embeddings", True)
        and not config.get("scale_embedding", False)
        and "WhisperForConditionalGeneration" in (config.get("architectures") or ["WhisperForConditionalGeneration"])
    )
    return path.is_dir() and files and plain


def _weights(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    if (path / WEIGHTS).is_file():
        return load_file(path / WEIGHTS)
    shards = sorted(set(json.loads((path / WEIGHTS_INDEX).read_text())["weight_map"].values()))
    state = {}
    for shard in shards:
        state.update(load_file(path / shard))
    return state


def load(location: str | Path, dtype: torch.dtype) -> TorchWhisper:
    """The model at ``location`` (``loadable``), its weights in ``dtype`` on the CPU, in eval mode."""
    path = Path(location)
    config = Settings.read(path / "config.json", CONFIG_DEFAULTS)
    generation_config = Settings.read(path / "generation_config.json", GENERATION_DEFAULTS)
    with torch.device("meta"):
        model = TorchWhisper(config, generation_config)
    state = {name: tensor.to(dtype) for name, tensor in _weights(path).items() if name != "proj_out.weight"}
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    if unexpected or set(missing) != {"proj_out.weight"}:
        raise ValueError(f"{path}: weights do not fit Whisper's layout (missing {missing}, unexpected {unexpected})")
    model.proj_out.weight = model.model.decoder.embed_tokens.weight  # tied, as transformers ties them
    return model.eval().requires_grad_(False)
