#!/bin/bash
# old (c376f09^, a worktree) and new (main) podscribe CLI on the held-out default seed, alternated
files="/tmp/heldoutdef/real01_quiet_guest.mp3 /tmp/heldoutdef/real02_phone_caller.m4a /tmp/heldoutdef/real03_noisy_room.ogg"
for round in 1 2; do
  for which in old new; do
    dir=/work/main; [ $which = old ] && dir=/work/wt-probe
    rm -rf /tmp/lwb/ab-$which
    start=$(date +%s.%N)
    (cd $dir && PYTHONPATH=$dir /work/main/.venv/bin/python -m pipeline.cli transcribe --out /tmp/lwb/ab-$which -q $files > /dev/null 2>&1)
    end=$(date +%s.%N)
    echo "round $round $which $(echo "$end - $start" | bc) s"
  done
done
