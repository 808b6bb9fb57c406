"""Read CTranslate2 (faster-whisper) Whisper models and convert them to Transformers.

The CT2 ``model.bin`` layout (binary version 6) is public: ctranslate2's
``model_spec.py`` writes it. This module inverts the name mapping of
ctranslate2's own Transformers converter (``WhisperLoader``), so a CT2 model
becomes a regular ``WhisperForConditionalGeneration`` directory (config,
safetensors, tokenizer, feature extractor, generation config).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}
_BFLOAT16 = 5


class CT2FormatError(ValueError):
    """The file is not a CTranslate2 Whisper model this reader understands."""


@dataclass
class CT2Model:
    spec_name: str
    revision: int
    variables: dict[str, np.ndarray]  # aliases resolved

    def scalar(self, name: str) -> int:
        return int(self.variables[name].reshape(-1)[0])


def model_bin_parts(ct2_dir: Path) -> list[Path]:
    """The file(s) that make up model.bin: the file itself, or its parts in order."""
    whole = ct2_dir / "model.bin"
    if whole.is_file():
        return [whole]
    parts = sorted(ct2_dir.glob("model.bin.part*"), key=lambda p: int(p.name.rsplit("part", 1)[1]))
    if not parts:
        raise CT2FormatError(f"{ct2_dir} has no model.bin (nor model.bin.part1, .part2, ...)")
    return parts


def read_model_bin(data: bytes) -> CT2Model:
    """Parse a whole CT2 model.bin held in memory."""
    pos = 0

    def take(fmt: str):
        nonlocal pos
        value = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return value[0]

    def string() -> str:
        nonlocal pos
        n = take("<H")
        raw = data[pos : pos + n]
        pos += n
        return raw[:-1].decode("utf-8")

    try:
        version = take("<I")
        if version != 6:
            raise CT2FormatError(f"unsupported CTranslate2 binary version {version} (expected 6)")
        spec_name = string()
        revision = take("<I")
        variables: dict[str, np.ndarray] = {}
        for _ in range(take("<I")):
            name = string()
            rank = take("<B")
            dims = [take("<I") for _ in range(rank)]
            dtype_id = take("<B")
            nbytes = take("<I")
            if pos + nbytes > len(data):
                raise CT2FormatError(f"model.bin is truncated (variable {name} runs past the end)")
            raw = data[pos : pos + nbytes]
            pos += nbytes
            if dtype_id == _BFLOAT16:
                bits = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
                array = bits.view(np.float32)
            elif dtype_id in _DTYPES:
                array = np.frombuffer(raw, dtype=_DTYPES[dtype_id])
            else:
                raise CT2FormatError(f"variable {name}: unknown dtype id {dtype_id}")
            variables[name] = array.reshape(dims)
        for _ in range(take("<I")):
            alias, target = string(), string()
            variables[alias] = variables[target]
    except struct.error as exc:
        raise CT2FormatError(f"model.bin is truncated ({exc})") from exc
    if pos != len(data):
        raise CT2FormatError(f"model.bin has {len(data) - pos} unexpected trailing bytes")
    if spec_name != "WhisperSpec":
        raise CT2FormatError(f"not a Whisper model: spec {spec_name!r}")
    return CT2Model(spec_name, revision, variables)


def load_model_bin(parts: list[Path]) -> CT2Model:
    return read_model_bin(b"".join(Path(p).read_bytes() for p in parts))


# --- name mapping (inverse of ctranslate2.converters.transformers.WhisperLoader) ---


def _attention(out: dict, ct2: str, hf: str, v: dict, cross: bool) -> None:
    if cross:
        out[f"{hf}.q_proj.weight"] = v[f"{ct2}/linear_0/weight"]
        out[f"{hf}.q_proj.bias"] = v[f"{ct2}/linear_0/bias"]
        k_w, v_w = np.split(v[f"{ct2}/linear_1/weight"], 2)
        _, v_b = np.split(v[f"{ct2}/linear_1/bias"], 2)
        out_proj = "linear_2"
    else:
        q_w, k_w, v_w = np.split(v[f"{ct2}/linear_0/weight"], 3)
        q_b, _, v_b = np.split(v[f"{ct2}/linear_0/bias"], 3)  # k bias is stored as zeros
        out[f"{hf}.q_proj.weight"], out[f"{hf}.q_proj.bias"] = q_w, q_b
        out_proj = "linear_1"
    out[f"{hf}.k_proj.weight"] = k_w
    out[f"{hf}.v_proj.weight"], out[f"{hf}.v_proj.bias"] = v_w, v_b
    out[f"{hf}.out_proj.weight"] = v[f"{ct2}/{out_proj}/weight"]
    out[f"{hf}.out_proj.bias"] = v[f"{ct2}/{out_proj}/bias"]


def _norm(out: dict, ct2: str, hf: str, v: dict) -> None:
    out[f"{hf}.weight"] = v[f"{ct2}/gamma"]
    out[f"{hf}.bias"] = v[f"{ct2}/beta"]


def _linear(out: dict, ct2: str, hf: str, v: dict) -> None:
    out[f"{hf}.weight"] = v[f"{ct2}/weight"]
    out[f"{hf}.bias"] = v[f"{ct2}/bias"]


def _count_layers(v: dict, prefix: str) -> int:
    n = 0
    while f"{prefix}/layer_{n}/ffn/linear_0/weight" in v:
        n += 1
    return n


def to_transformers_state_dict(model: CT2Model) -> tuple[dict[str, np.ndarray], dict]:
    """Map CT2 variables to Whisper state-dict names; also return the shape facts."""
    v = model.variables
    out: dict[str, np.ndarray] = {}
    for side in ("encoder", "decoder"):
        for i in range(_count_layers(v, side)):
            ct2, hf = f"{side}/layer_{i}", f"model.{side}.layers.{i}"
            _attention(out, f"{ct2}/self_attention", f"{hf}.self_attn", v, cross=False)
            _norm(out, f"{ct2}/self_attention/layer_norm", f"{hf}.self_attn_layer_norm", v)
            if side == "decoder":
                _attention(out, f"{ct2}/attention", f"{hf}.encoder_attn", v, cross=True)
                _norm(out, f"{ct2}/attention/layer_norm", f"{hf}.encoder_attn_layer_norm", v)
            _linear(out, f"{ct2}/ffn/linear_0", f"{hf}.fc1", v)
            _linear(out, f"{ct2}/ffn/linear_1", f"{hf}.fc2", v)
            _norm(out, f"{ct2}/ffn/layer_norm", f"{hf}.final_layer_norm", v)
        _norm(out, f"{side}/layer_norm", f"model.{side}.layer_norm", v)
        out[f"model.{side}.embed_positions.weight"] = v[f"{side}/position_encodings/encodings"]
    for conv in ("conv1", "conv2"):
        _linear(out, f"encoder/{conv}", f"model.encoder.{conv}", v)
    out["model.decoder.embed_tokens.weight"] = v["decoder/embeddings/weight"]
    vocab, d_model = v["decoder/embeddings/weight"].shape
    shape = {
        "vocab_size": int(vocab),
        "d_model": int(d_model),
        "num_mel_bins": int(v["encoder/conv1/weight"].shape[1]),
        "encoder_layers": _count_layers(v, "encoder"),
        "decoder_layers": _count_layers(v, "decoder"),
        "encoder_attention_heads": model.scalar("encoder/num_heads"),
        "decoder_attention_heads": model.scalar("decoder/num_heads"),
        "encoder_ffn_dim": int(v["encoder/layer_0/ffn/linear_0/weight"].shape[0]),
        "decoder_ffn_dim": int(v["decoder/layer_0/ffn/linear_0/weight"].shape[0]),
        "max_source_positions": int(v["encoder/position_encodings/encodings"].shape[0]),
        "max_target_positions": int(v["decoder/position_encodings/encodings"].shape[0]),
    }
    return out, shape


# --- tokenizer and generation config ---


def _timestamp_tokens(n: int = 1501) -> list[str]:
    return ["<|%.2f|>" % (i * 0.02) for i in range(n)]


def _complete_tokenizer(tokenizer_json: dict, vocab_size: int) -> dict:
    """Add the 1501 timestamp tokens where the CT2 copy's tokenizer.json lacks them."""
    added = tokenizer_json["added_tokens"]
    have = {t["content"] for t in added}
    next_id = max(t["id"] for t in added) + 1
    for content in _timestamp_tokens():
        if content in have:
            continue
        added.append(
            {
                "id": next_id,
                "content": content,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": False,
            }
        )
        next_id += 1
    if next_id != vocab_size:
        raise CT2FormatError(f"tokenizer has {next_id} tokens but the model's vocabulary is {vocab_size}")
    return tokenizer_json


def _special_ids(tokenizer_json: dict) -> dict[str, int]:
    return {t["content"]: t["id"] for t in tokenizer_json["added_tokens"]}


def _generation_config(ct2_config: dict, ids: dict[str, int], shape: dict) -> dict:
    multilingual = shape["vocab_size"] >= 51865
    eot = ids["<|endoftext|>"]
    sot = ids["<|startoftranscript|>"]
    id_to_token = {i: t for t, i in ids.items()}
    lang_to_id = {id_to_token[i]: i for i in ct2_config.get("lang_ids", [])} if multilingual else {}
    num_heads = shape["decoder_attention_heads"]
    heads = ct2_config.get("alignment_heads") or [
        [layer, head]
        for layer in range(shape["decoder_layers"] // 2, shape["decoder_layers"])
        for head in range(num_heads)
    ]
    config = {
        "alignment_heads": [list(h) for h in heads],
        "begin_suppress_tokens": list(ct2_config.get("suppress_ids_begin", [220, eot])),
        "suppress_tokens": list(ct2_config.get("suppress_ids", [])),
        "bos_token_id": eot,
        "eos_token_id": eot,
        "pad_token_id": eot,
        "decoder_start_token_id": sot,
        "is_multilingual": multilingual,
        "max_initial_timestamp_index": 50,
        "max_length": shape["max_target_positions"],
        "no_timestamps_token_id": ids["<|notimestamps|>"],
        "prev_sot_token_id": ids["<|startofprev|>"],
        "return_timestamps": False,
    }
    if multilingual:
        config["lang_to_id"] = lang_to_id
        config["task_to_id"] = {"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]}
        config["forced_decoder_ids"] = None
    return config


def _model_config(shape: dict, gen: dict) -> dict:
    return {
        "architectures": ["WhisperForConditionalGeneration"],
        "model_type": "whisper",
        "activation_function": "gelu",
        "scale_embedding": False,
        "tie_word_embeddings": True,
        "torch_dtype": "float16",
        "use_cache": True,
        "bos_token_id": gen["bos_token_id"],
        "eos_token_id": gen["eos_token_id"],
        "pad_token_id": gen["pad_token_id"],
        "decoder_start_token_id": gen["decoder_start_token_id"],
        **shape,
    }


def convert(ct2_dir: Path, out_dir: Path, parts: list[Path] | None = None) -> Path:
    """Convert a CT2 Whisper directory into a Transformers directory at ``out_dir``.

    Written into a temporary sibling of this process's own and renamed into place, so a killed conversion
    never leaves a half-written model that looks complete, and workers that start together on a fresh machine
    each convert into their own folder: the first rename wins, the others drop theirs (never a folder another
    process may be loading from).
    """
    ct2_dir, out_dir = Path(ct2_dir), Path(out_dir)
    model = load_model_bin(parts or model_bin_parts(ct2_dir))
    state, shape = to_transformers_state_dict(model)
    ct2_config = json.loads((ct2_dir / "config.json").read_text())
    tokenizer_json = _complete_tokenizer(json.loads((ct2_dir / "tokenizer.json").read_text()), shape["vocab_size"])
    gen = _generation_config(ct2_config, _special_ids(tokenizer_json), shape)

    remove_dead_partials(out_dir)
    tmp = out_dir.with_name(f"{out_dir.name}.partial-{socket.gethostname()}-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        _write_converted(tmp, state, shape, gen, tokenizer_json, ct2_dir)
        if out_dir.exists() and not (out_dir / "model.safetensors").is_file():
            shutil.rmtree(out_dir)  # an incomplete folder of an older layout: nothing loads from it
        try:
            tmp.rename(out_dir)
        except OSError:
            if not (out_dir / "model.safetensors").is_file():
                raise
            # another process converted the same model first: its copy is the same bytes
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def remove_dead_partials(out_dir: Path) -> None:
    """The temporary folders of conversions into ``out_dir`` whose process died (SIGKILL, a reboot: 76 MB for
    tiny.en, left in the cache for good): removed. Named by host and pid, so a cache shared by several machines
    keeps the folders of conversions running elsewhere (older ones, named by pid alone, are taken as this host's)."""
    host = socket.gethostname()
    for folder in out_dir.parent.glob(f"{out_dir.name}.partial-*"):
        owner = folder.name.rsplit(".partial-", 1)[1]
        owner_host, _, pid = owner.rpartition("-")
        if owner_host not in ("", host) or not pid.isdigit() or _alive(int(pid)):
            continue
        shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _write_converted(tmp: Path, state: dict, shape: dict, gen: dict, tokenizer_json: dict, ct2_dir: Path) -> None:
    from safetensors.numpy import save_file
    from transformers import WhisperFeatureExtractor, WhisperTokenizer

    save_file(
        {k: np.ascontiguousarray(a) for k, a in state.items()},
        str(tmp / "model.safetensors"),
        metadata={"format": "pt"},
    )
    (tmp / "config.json").write_text(json.dumps(_model_config(shape, gen), indent=2))
    (tmp / "generation_config.json").write_text(json.dumps(gen, indent=2))
    (tmp / "tokenizer.json").write_text(json.dumps(tokenizer_json, ensure_ascii=False))
    specials = [t["content"] for t in tokenizer_json["added_tokens"] if t.get("special")]
    tokenizer = WhisperTokenizer(
        tokenizer_file=str(tmp / "tokenizer.json"),
        extra_special_tokens=[t for t in specials if t != "<|endoftext|>"],
        model_max_length=1024,
    )
    tokenizer.save_pretrained(tmp)
    WhisperFeatureExtractor(feature_size=shape["num_mel_bins"]).save_pretrained(tmp)
    (tmp / "podscribe_source.json").write_text(json.dumps({"converted_from": str(ct2_dir)}, indent=2))


def is_ct2_dir(path: Path) -> bool:
    path = Path(path)
    return (
        path.is_dir()
        and (path / "config.json").is_file()
        and ((path / "model.bin").is_file() or any(path.glob("model.bin.part*")))
    )
