#!/bin/bash
# old (476b8f7: second chances through transformers' generate, a worktree) and new (main) podscribe CLI, alternated,
# on one set's three episodes: ab.sh SETDIR ROUNDS
set=$1; rounds=${2:-1}
files="$set/real01_quiet_guest.mp3 $set/real02_phone_caller.m4a $set/real03_noisy_room.ogg"
for round in $(seq 1 $rounds); do
  for which in old new; do
    dir=/work/main; [ $which = old ] && dir=/work/wt-old
    out=/tmp/os/$(basename $set)-$which
    rm -rf $out
    start=$(date +%s.%N)
    (cd $dir && PYTHONPATH=$dir /work/main/.venv/bin/python -m pipeline.cli transcribe --out $out -q $files > /dev/null 2>/tmp/os/err-$which)
    end=$(date +%s.%N)
    echo "$(basename $set) round $round $which $(echo "$end - $start" | bc) s"
  done
done
