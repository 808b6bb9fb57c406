#!/bin/bash
# alternate the code before (wt-base) and after (main) on each set, podscribe alone
cd /work/main
for s in def 61 59 7 23 dev; do
  if [ $s = dev ]; then lf=""; else lf="--longform /tmp/heldout$s"; fi
  for side in base new; do
    if [ $side = base ]; then dir=/work/wt-base; else dir=/work/main; fi
    (cd $dir && timeout 900 /work/main/.venv/bin/python -m bench.bench_longform $lf --skip-fw --out /tmp/x/ab-$s-$side.json > /tmp/x/ab-$s-$side.txt 2>&1)
    echo "$s $side $(grep OVERALL /tmp/x/ab-$s-$side.txt)"
  done
done
