#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 600), JOBS at a time (default 1), with
# AddressSanitizer, and prints one line per target: executions, seconds, corpus files,
# and whether it found a failure (its input is then in fuzz/artifacts/TARGET/).
#
#   fuzz/campaign.sh            # every target, 10 minutes each
#   fuzz/campaign.sh 3600 2     # an hour each, two at a time
#   TARGETS="model log_block" fuzz/campaign.sh 600
#
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`); runs on the stable toolchain
# (RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass the sanitizer flags). SANITIZER=none runs
# without AddressSanitizer (faster, catches less).
set -uo pipefail
cd "$(dirname "$0")"
if ! cargo fuzz --version > /dev/null 2>&1; then
    echo "campaign.sh: cargo-fuzz is not installed; install it with: cargo install cargo-fuzz --locked" >&2
    exit 2
fi
seconds="${1:-600}"
jobs="${2:-1}"
sanitizer="${SANITIZER:-address}"
targets="${TARGETS:-$(RUSTC_BOOTSTRAP=1 cargo fuzz list)}"
logs="$(mktemp -d)"

for target in $targets; do
    RUSTC_BOOTSTRAP=1 cargo fuzz build -s "$sanitizer" "$target" >&2 || exit 1
done

run_one() {
    local target="$1"
    mkdir -p "work/$target"
    RUSTC_BOOTSTRAP=1 cargo fuzz run -s "$sanitizer" "$target" "work/$target" "corpus/$target" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
        > "$logs/$target.log" 2>&1
    echo $? > "$logs/$target.rc"
}

running=0
for target in $targets; do
    run_one "$target" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait

status=0
printf '%-22s %14s %8s %8s %s\n' target executions seconds corpus result
for target in $targets; do
    log="$logs/$target.log"
    execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)"
    secs="$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | grep -o 'in [0-9]*' | grep -o '[0-9]*' | tail -1)"
    corpus="$(find "work/$target" "corpus/$target" -type f 2>/dev/null | wc -l)"
    if [ "$(cat "$logs/$target.rc")" = 0 ]; then
        result=clean
    else
        result="FAILED (see $log and artifacts/$target/)"
        status=1
    fi
    printf '%-22s %14s %8s %8s %s\n' "$target" "${execs:-?}" "${secs:-?}" "$corpus" "$result"
done
exit "$status"
