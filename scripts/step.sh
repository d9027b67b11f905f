#!/usr/bin/env bash
# The step table of `make test`, `make check` and `make compat`: each step's wall time, printed
# at the end (docs/development.md keeps the budgets and the figures measured).
#
#   scripts/step.sh begin TITLE          start a table (target/steps/current.tsv)
#   scripts/step.sh run NAME CMD [ARG…]  run CMD as step NAME and record its seconds; when CMD
#                                        fails, print the table so far and exit with its status
#   scripts/step.sh beside NAME CMD [ARG…]
#                                        start CMD as step NAME in the background, beside the
#                                        steps that follow (its output to target/steps/NAME.log);
#                                        steps CMD runs with step.sh land in the table as its own
#                                        rows (a lane of several steps)
#   scripts/step.sh join NAME            wait for step NAME, print its output, record its seconds;
#                                        when it failed, print the table and exit with its status
#   scripts/step.sh end                  print the table with the total, and keep a copy in
#                                        target/steps/<title>.tsv
#
# A step's time is its wall clock (date +%s.%N). The table's total is the run's wall clock; a
# step run beside others is marked "beside" and its time overlaps theirs. A step that fails
# stops the steps still running beside it (their process group: they were started here).
# STEP_TABLE=<file> writes the table elsewhere.
set -uo pipefail
cd "$(dirname "$0")/.."
TABLE=${STEP_TABLE:-target/steps/current.tsv}

now() { date +%s.%N; }
STEPS_DIR=$(dirname "$TABLE")

# stop_beside: stop every step still running beside (its process group, started by `beside`).
stop_beside() {
  local f
  for f in "$STEPS_DIR"/*.beside-pid; do
    [ -f "$f" ] || continue
    [ -f "${f%.beside-pid}.beside-rc" ] || kill -- "-$(cat "$f")" 2>/dev/null
    rm -f "$f"
  done
}

print_table() {
  [ -f "$TABLE" ] || return 0
  awk -F'\t' '
    NR == 1 { title = $2; start = $3; next }
    { name[++n] = $1; secs[n] = $2; status[n] = $3 }
    END {
      total = now - start
      printf "\n%s: wall time per step\n", title
      printf "| %-24s | %9s | %-15s |\n", "step", "seconds", "status"
      printf "|%s|%s|%s|\n", "--------------------------", "-----------", "-----------------"
      for (i = 1; i <= n; i++)
        printf "| %-24s | %9.1f | %-15s |\n", name[i], secs[i], status[i]
      printf "| %-24s | %9.1f | %-15s |\n", "total (wall clock)", total, ""
      printf "%s: %.1f min\n", title, total / 60
    }' now="$(now)" "$TABLE"
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
    [ -f "$TABLE" ] || bash "$0" begin "steps"
    echo "==> step $name: $*"
    t0=$(now)
    "$@"
    rc=$?
    secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
    if [ $rc -eq 0 ]; then status=ok; else status="FAILED"; fi
    printf '%s\t%s\t%s\n' "$name" "$secs" "$status" >> "$TABLE"
    echo "==> step $name: $status in ${secs}s"
    if [ $rc -ne 0 ]; then
      stop_beside
      print_table
      exit $rc
    fi
    ;;
  beside)
    name=${2:?step name}
    shift 2
    [ $# -gt 0 ] || { echo "step.sh beside: no command" >&2; exit 2; }
    [ -f "$TABLE" ] || bash "$0" begin "steps"
    base=$STEPS_DIR/$name
    rm -rf "$base.beside-rc" "$base.beside-pid" "$base.lane"
    echo "==> step $name (beside the next steps; output: $base.log): $*"
    now > "$base.beside-start"
    # The lane's own steps go to a table of their own (another directory: its failures stop only
    # what runs beside inside it), added to this one by `join`.
    mkdir -p "$base.lane"
    STEP_TABLE=$base.lane/steps.tsv bash "$0" begin "$name" >/dev/null
    # Its own session (process group), so a failure elsewhere can stop all of it.
    STEP_TABLE=$base.lane/steps.tsv setsid bash -c '"$@" >"$0.log" 2>&1; echo $? >"$0.beside-rc.tmp"; mv "$0.beside-rc.tmp" "$0.beside-rc"' \
      "$base" "$@" </dev/null >/dev/null 2>&1 &
    echo $! > "$base.beside-pid"
    ;;
  join)
    name=${2:?step name}
    base=$STEPS_DIR/$name
    [ -f "$base.beside-start" ] || { echo "step.sh join: no step $name started beside" >&2; exit 2; }
    echo "==> step $name: waiting for it (started beside)"
    while [ ! -f "$base.beside-rc" ]; do sleep 1; done
    cat "$base.log"
    rc=$(cat "$base.beside-rc")
    secs=$(awk -v a="$(cat "$base.beside-start")" -v b="$(stat -c %.9Y "$base.beside-rc")" 'BEGIN { printf "%.1f", b - a }')
    rm -f "$base.beside-pid" "$base.beside-start"
    if [ "$rc" -eq 0 ]; then status="ok, beside"; else status="FAILED"; fi
    if [ "$(wc -l < "$base.lane/steps.tsv")" -gt 1 ]; then
      awk -F'\t' 'NR > 1 { printf "%s\t%s\t%s, beside\n", $1, $2, $3 }' "$base.lane/steps.tsv" >> "$TABLE"
    else
      printf '%s\t%s\t%s\n' "$name" "$secs" "$status" >> "$TABLE"
    fi
    echo "==> step $name: $status in ${secs}s"
    if [ "$rc" -ne 0 ]; then
      stop_beside
      print_table
      exit "$rc"
    fi
    ;;
  end)
    print_table
    title=$(awk -F'\t' 'NR == 1 { print $2 }' "$TABLE" | tr -c 'A-Za-z0-9\n-' '-')
    cp "$TABLE" "$(dirname "$TABLE")/${title}.tsv"
    ;;
  *)
    echo "usage: $0 begin TITLE | run NAME CMD [ARG…] | beside NAME CMD [ARG…] | join NAME | end" >&2
    exit 2
    ;;
esac
