#!/usr/bin/env bash
# The step table of `make test`, `make check` and `make compat`: each step's wall time, printed
# at the end (docs/development.md keeps the budgets and the figures measured).
#
#   scripts/step.sh begin TITLE          start a table (target/steps/current.tsv)
#   scripts/step.sh run NAME CMD [ARG…]  run CMD as step NAME and record its seconds; when CMD
#                                        fails, print the table so far and exit with its status
#   scripts/step.sh end                  print the table with the total, and keep a copy in
#                                        target/steps/<title>.tsv
#
# A step's time is its wall clock (date +%s.%N): on a 2-core machine, the sum of the steps is the
# run's time. STEP_TABLE=<file> writes the table elsewhere.
set -uo pipefail
cd "$(dirname "$0")/.."
TABLE=${STEP_TABLE:-target/steps/current.tsv}

now() { date +%s.%N; }

print_table() {
  [ -f "$TABLE" ] || return 0
  awk -F'\t' '
    NR == 1 { title = $2; start = $3; next }
    { name[++n] = $1; secs[n] = $2; status[n] = $3; total += $2 }
    END {
      printf "\n%s: wall time per step\n", title
      printf "| %-24s | %9s | %-6s |\n", "step", "seconds", "status"
      printf "|%s|%s|%s|\n", "--------------------------", "-----------", "--------"
      for (i = 1; i <= n; i++)
        printf "| %-24s | %9.1f | %-6s |\n", name[i], secs[i], status[i]
      printf "| %-24s | %9.1f | %-6s |\n", "total", total, ""
      printf "%s: %.1f min\n", title, total / 60
    }' "$TABLE"
}

case ${1:-} in
  begin)
    mkdir -p "$(dirname "$TABLE")"
    printf 'title\t%s\t%s\n' "${2:?title}" "$(now)" > "$TABLE"
    ;;
  run)
    name=${2:?step name}
    shift 2
    [ $# -gt 0 ] || { echo "step.sh run: no command" >&2; exit 2; }
    [ -f "$TABLE" ] || "$0" begin "steps"
    echo "==> step $name: $*"
    t0=$(now)
    "$@"
    rc=$?
    secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
    if [ $rc -eq 0 ]; then status=ok; else status="FAILED"; fi
    printf '%s\t%s\t%s\n' "$name" "$secs" "$status" >> "$TABLE"
    echo "==> step $name: $status in ${secs}s"
    if [ $rc -ne 0 ]; then
      print_table
      exit $rc
    fi
    ;;
  end)
    print_table
    title=$(awk -F'\t' 'NR == 1 { print $2 }' "$TABLE" | tr -c 'A-Za-z0-9\n-' '-')
    cp "$TABLE" "$(dirname "$TABLE")/${title}.tsv"
    ;;
  *)
    echo "usage: $0 begin TITLE | run NAME CMD [ARG…] | end" >&2
    exit 2
    ;;
esac
