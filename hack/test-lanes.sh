#!/usr/bin/env bash
# Runs make test's test stages in two lanes at once, because the e2e suite
# alone took 38 of a 50-minute make test and most of its time is spent
# waiting on clusters, not computing:
#
#   lane a: the e2e specs of E2E_LANE_A (those that build network namespaces
#           and real nodes: one process holds them all, so their per-run
#           names never meet another run's), then the unit tests with -race,
#           every fuzz target, and the packages make test runs without -race
#           besides the e2e suite;
#   lane b: every other e2e spec.
#
# Each e2e lane is its own test process, in a network namespace of its own
# (netlab.Main), with its own clusters. A lane stops at its first failure;
# the script waits for both and fails when either did. Every output line is
# prefixed with its lane. Each e2e lane's time per area is written to
# bin/e2e-times-<lane>.txt and printed at the end.
set -uo pipefail
cd "$(dirname "$0")/.."

go=${GO:-go}
timeout=${TEST_TIMEOUT:-65m}
read -r -a flags <<<"${GOTESTFLAGS:-}"
no_race=${NO_RACE:?NO_RACE: the packages not run with -race}
lane_a_labels=${E2E_LANE_A:-real || fabric || demo}
fuzztime=${FUZZTIME:-5s}
mkdir -p bin

e2e() { # lane, label filter
	FERRY_E2E_TIMES="$PWD/bin/e2e-times-$1.txt" \
		"$go" test -count=1 -timeout "$timeout" "${flags[@]}" ./test/e2e/ -args -ginkgo.label-filter="$2"
}

lane_a() {
	e2e a "$lane_a_labels" || return
	mapfile -t race < <("$go" list ./... | grep -vE "$no_race")
	"$go" test -race -count=1 -timeout "$timeout" "${flags[@]}" "${race[@]}" || return
	GO=$go FUZZTIME=$fuzztime hack/fuzz.sh || return
	mapfile -t plain < <("$go" list ./... | grep -E "$no_race" | grep -v '/test/e2e$')
	"$go" test -count=1 -timeout "$timeout" "${flags[@]}" "${plain[@]}"
}

lane_b() {
	e2e b "!($lane_a_labels)"
}

# The prefixing sed ignores interrupts and terminations (an ignored signal
# stays ignored across exec): it keeps draining its lane until the tests
# have cleaned up and exited, instead of dying first and killing them with
# SIGPIPE halfway through their cleanup.
prefix() {
	trap '' INT TERM
	sed -u "s/^/$1| /"
}

# Each lane is a process group of its own (job control), so an interrupt
# or a termination of this script is passed on to everything in both lanes,
# and each test process cleans up its clusters.
set -m

start=$(date +%s)
rm -f bin/e2e-times-a.txt bin/e2e-times-b.txt
(lane_a 2>&1 | prefix a) &
a=$!
(lane_b 2>&1 | prefix b) &
b=$!
forward() {
	trap - INT TERM
	kill -"$1" -- "-$a" "-$b" 2>/dev/null
}
trap 'forward INT' INT
trap 'forward TERM' TERM
wait "$a"
ra=$?
# wait returns early when a trapped signal arrives; wait once more for the
# lanes to finish their cleanup.
while kill -0 "$a" 2>/dev/null; do wait "$a"; ra=$?; done
echo "lane a: exit $ra after $(($(date +%s) - start))s"
wait "$b"
rb=$?
while kill -0 "$b" 2>/dev/null; do wait "$b"; rb=$?; done
echo "lane b: exit $rb after $(($(date +%s) - start))s"
for lane in a b; do
	if [ -s "bin/e2e-times-$lane.txt" ]; then
		echo "e2e lane $lane:"
		cat "bin/e2e-times-$lane.txt"
	fi
done
[ "$ra" -eq 0 ] && [ "$rb" -eq 0 ]
