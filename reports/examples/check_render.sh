#!/usr/bin/env bash
# Render every committed example again (`zqbench report` on a copy) and compare each file
# with the committed one, byte for byte: a refactor that changes no output prints only
# "same" lines. Compare folders are checked with `zqbench compare` from the repository root.
#
#   reports/examples/check_render.sh
set -u
cd "$(dirname "$0")/../.."
ZQ=${ZQBENCH:-.venv/bin/zqbench}
for d in reports/examples/*/; do
  [ -f "$d/summary.json" ] || continue
  tmp=$(mktemp -d); cp -r "$d"/. "$tmp"/
  $ZQ report "$tmp" >/dev/null 2>"$tmp.err" || { echo "FAIL $d: $(cat "$tmp.err")"; continue; }
  for f in summary.md junit.xml report.html summary.json; do
    if [ -f "$d/$f" ]; then cmp -s "$d/$f" "$tmp/$f" && echo "same $d$f" || echo "DIFF $d$f"; fi
  done
  rm -rf "$tmp" "$tmp.err"
done
for d in reports/examples/*-compare/; do
  name=$(basename "$d" -compare)
  tmp=$(mktemp -d)
  $ZQ compare "reports/examples/$name-fifo" "reports/examples/$name-zero-queue" --out "$tmp" \
    >/dev/null 2>&1
  for f in compare.md compare.json compare.html; do
    if [ -f "$d/$f" ]; then cmp -s "$d/$f" "$tmp/$f" && echo "same $d$f" || echo "DIFF $d$f"; fi
  done
  rm -rf "$tmp"
done
