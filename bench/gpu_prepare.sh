#!/usr/bin/env bash
# Prepare what `bench/gpu.sh` needs on a CUDA machine that has python3, torch and transformers but no network,
# no ffmpeg and no room for more than ~60 MB of carried files. Run here (a Debian machine with network), then
# carry `.device` (ignored by git):
#
#   bash bench/gpu_prepare.sh                     # -> .device/{wheels,bin,tiny.en-int8,clips}
#   run(command="bash bench/gpu.sh", carry=[".device"], timeout_s=540)
#
# What it makes:
# - .device/wheels: the Python packages podscribe needs that the device image lacks (ffmpeg-python, and
#   faster-whisper for its bundled Silero VAD; faster-whisper's own heavy imports, av and ctranslate2, are not
#   carried: bench/gpu_shims stands in for them, and nothing podscribe runs calls into either), and the
#   transformers CI runs with what it needs at import (the device's own is older than podscribe's checks allow);
# - .device/bin: ffmpeg and ffprobe built from Debian's source with only what podscribe asks of them (file and
#   pipe protocols, wav/flac/mp3/ogg/mp4 in, f32le out, resampling), static, a few MB (a distribution's ffmpeg
#   with its libraries is over 100 MB);
# - .device/tiny.en-int8: tiny.en's real weights (75 MB in float16, too big to carry) rounded to int8 per output
#   channel (38 MB) by bench.gpu_pack, dequantized to float16 there: a real trained model, so the end-to-end run
#   transcribes speech, not noise; and tiny.en's tokenizer and configs, so the device needs no model wheel;
# - .device/clips: short real clips from ../shared/speech (flac) and their reference text.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
out=.device
mkdir -p "$out/wheels" "$out/bin" "$out/clips"
grep -qx '/.device/' .git/info/exclude 2>/dev/null || echo '/.device/' >>.git/info/exclude

# 1. wheels for the device's Python (3.12). The device's transformers is older than the one podscribe's borrowed
#    internals are checked against (pipeline/backend/hf_internals: its checks refuse 5.17), so the transformers CI
#    runs travels too, with the huggingface-hub it requires at import and what that imports. `--no-deps`: each is
#    named; `--target` there puts them ahead of the image's own.
wheel() {
  $PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$out/wheels" "$@"
}
wheel ffmpeg-python==0.2.0 future==1.0.0 faster-whisper==1.2.1 \
  transformers==5.25.0 huggingface-hub==2.4.0 httpx2==2.16.2 httpcore2==2.16.2 truststore==0.10.5 h11==0.16.0 \
  idna==3.20 anyio==4.16.0 typing-extensions==4.16.0 click==8.5.1 certifi==2026.10.19.post1 regex==2026.11.19 \
  jiwer==4.0.0 rapidfuzz==3.14.6 whisper-normalizer==0.1.15 more-itertools==11.2.1 webvtt-py==0.6.0
$PY -m pip wheel -q --no-deps -w "$out/wheels" srt==3.5.3  # an sdist only: built here, pure Python

# 2. a minimal static ffmpeg/ffprobe (about 5 minutes on 2 cores, once)
if [ ! -f "$out/bin/ffmpeg.xz" ] || [ ! -f "$out/bin/ffprobe.xz" ]; then
  src=${FFMPEG_SRC:-/tmp/podscribe-ffmpeg-src}
  mkdir -p "$src"
  if [ ! -f "$src/configure" ]; then
    if ! ls "$src"/../ffmpeg_*.orig.tar.xz >/dev/null 2>&1; then
      list=/etc/apt/sources.list.d/podscribe-src.sources
      sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources >"$list"
      apt-get update -qq
      (cd "$src/.." && apt-get source --download-only ffmpeg >/dev/null)
      rm -f "$list"
    fi
    tar -xf "$(ls "$src"/../ffmpeg_*.orig.tar.xz | head -1)" -C "$src" --strip-components=1
  fi
  (
    cd "$src"
    # no nasm needed: assembly off (decoding a short clip does not need its speed)
    ./configure --disable-everything --disable-autodetect --disable-doc --disable-network --disable-debug \
      --disable-x86asm --disable-ffplay --enable-ffmpeg --enable-ffprobe --enable-static --disable-shared \
      --extra-ldflags=-static --pkg-config-flags=--static \
      --enable-protocol=file,pipe \
      --enable-demuxer=wav,flac,mp3,ogg,mov,matroska,aac,w64 \
      --enable-decoder=pcm_s16le,pcm_s24le,pcm_s32le,pcm_f32le,flac,mp3float,mp3,aac,opus,vorbis \
      --enable-parser=flac,mpegaudio,aac,opus,vorbis \
      --enable-muxer=pcm_f32le,wav,null --enable-encoder=pcm_f32le,pcm_s16le \
      --enable-filter=aresample,aformat,anull,atrim,pan,amix,volume >/dev/null
    make -j"$(nproc)" ffmpeg ffprobe >/dev/null
  )
  strip -o "$out/bin/ffmpeg" "$src/ffmpeg"
  strip -o "$out/bin/ffprobe" "$src/ffprobe"
fi

# 3. tiny.en, real weights in int8, and 4. the clips
$PY -m bench.gpu_pack --out "$out"
# 5. what compresses travels as .xz (bench.gpu_pack --unpack and bench/gpu.sh undo it): the weights 38 -> 28 MB
for f in "$out"/tiny.en-int8/weights-int8.safetensors "$out"/tiny.en-int8/tokenizer.json "$out"/bin/ffmpeg "$out"/bin/ffprobe; do
  [ -f "$f" ] && xz -T0 -6 -f "$f"
done
du -sh "$out"/*
du -sh --exclude=.git --exclude=.venv --exclude=.cache . | tail -1
