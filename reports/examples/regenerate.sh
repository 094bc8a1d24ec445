#!/usr/bin/env bash
# Regenerate the committed example reports against the bundled reference server (sim engine).
#
#   reports/examples/regenerate.sh                 # smoke, burst, mixed-length, saturation
#   reports/examples/regenerate.sh mixed-length    # any bundled scenario names
#
# For each scenario: one run with the zero-queue scheduler, one with fifo, then
# `zqbench compare fifo zero-queue`. Only small files are kept (no plots/ folder: the
# figures are embedded in report.html; no server log).
set -euo pipefail
cd "$(dirname "$0")/../.."
ZQ=${ZQBENCH:-.venv/bin/zqbench}
HERE=reports/examples
if [ "$#" -eq 0 ]; then set -- smoke burst mixed-length saturation; fi

scale_flags() {  # scaled down so an example stays a few hundred requests
  case "$1" in
    smoke) echo "" ;;
    # Its ramp must pass the sim server's capacity; FIFO's [stop] rules end it early.
    saturation) echo "" ;;
    # 4 req/s already: shorter, not sparser; a 20K context so long and medium differ.
    mixed-length) echo "--duration-scale 0.5 --server-arg=--max-context=20000" ;;
    *) echo "--rate-scale 0.05 --duration-scale 0.2" ;;
  esac
}

for scenario in "$@"; do
  for scheduler in zero-queue fifo; do
    out="$HERE/$scenario-$scheduler"
    rm -rf "$out"
    # A failing or invalid verdict is a result worth keeping, not an error of this script.
    # shellcheck disable=SC2046
    "$ZQ" run "$scenario" --server-engine sim --server-scheduler "$scheduler" --out "$out" \
      --quiet $(scale_flags "$scenario") || echo "($scenario $scheduler: exit $?)"
    "$ZQ" report "$out" > /dev/null
    rm -rf "$out/plots" "$out/reference_server.log"
  done
  cmp="$HERE/$scenario-compare"
  rm -rf "$cmp"
  "$ZQ" compare "$HERE/$scenario-fifo" "$HERE/$scenario-zero-queue" --out "$cmp" > /dev/null \
    || echo "($scenario compare: exit $?)"
  rm -rf "$cmp/plots"
done
du -sh "$HERE"
