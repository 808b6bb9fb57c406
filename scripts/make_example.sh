#!/usr/bin/env bash
# Build examples/build/episode.mp3: two espeak-ng voices reading examples/episode.txt,
# joined by ffmpeg with pauses of 0.6 to 2.4 s (a 2-3 minute two-voice "episode").
set -euo pipefail
cd "$(dirname "$0")/.."
out=examples/build
mkdir -p "$out/lines"
list="$out/lines/list.txt"
: > "$list"
i=0
grep -v '^#' examples/episode.txt | while IFS='|' read -r voice text; do
  [ -n "$text" ] || continue
  i=$((i + 1))
  espeak-ng -v "$voice" -s 135 -w "$out/lines/$i.wav" "$text"
  pause=$(awk -v i="$i" 'BEGIN { printf "%.1f", 0.6 + (i * 7 % 10) * 0.2 }')
  ffmpeg -nostdin -v error -y -f lavfi -i "anullsrc=r=22050:cl=mono" -t "$pause" "$out/lines/$i.pause.wav"
  printf "file '%s'\nfile '%s'\n" "$i.wav" "$i.pause.wav" >> "$list"
done
ffmpeg -nostdin -v error -y -f concat -safe 0 -i "$list" -ar 44100 -ac 2 -b:a 96k "$out/episode.mp3"
echo "$out/episode.mp3"
