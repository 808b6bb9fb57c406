#!/bin/bash
# podscribe transcribe of 1 s of speech in fresh processes, the code before (a worktree) and after alternated: ab.sh PAIRS
for i in $(seq 1 ${1:-8}); do
  for which in before after; do
    dir=/work/main; [ $which = before ] && dir=/work/wt-old
    rm -rf /tmp/os/qe/job
    start=$(date +%s.%N)
    (cd $dir && PYTHONPATH=$dir /work/main/.venv/bin/python -m pipeline.cli transcribe --out /tmp/os/qe/job -q /tmp/os/one-speech.wav > /dev/null 2>&1)
    end=$(date +%s.%N)
    echo "$which $(echo "$end - $start" | bc)"
  done
done
