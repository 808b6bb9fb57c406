# usage: ab.sh N  -> alternated runs, old (worktree) vs new (main)
for i in $(seq 1 $1); do
 for v in old new; do
  d=/work/main; [ $v = old ] && d=/tmp/su/base
  rm -rf /tmp/su/j
  s=$(date +%s.%N)
  (cd $d && /work/main/.venv/bin/python -m podscribe transcribe /tmp/su/one.wav --model base --out /tmp/su/j >/dev/null 2>/tmp/su/err.$v) || { echo FAIL $v; tail -3 /tmp/su/err.$v; }
  e=$(date +%s.%N)
  echo "$v $(echo "$e - $s" | bc)"
 done
done
