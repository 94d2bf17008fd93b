#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (default 5s): the
# short run `make test` does. A target's seed corpus always runs with the
# unit tests; this explores past it. A failure leaves its input under the
# package's testdata/fuzz/ for `go test -run`.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}
go=${GO:-go}
count=0
while IFS=: read -r file name; do
	pkg=./$(dirname "$file")
	echo "fuzz: $name in $pkg for $fuzztime"
	log=$(mktemp)
	if ! $go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" 2>&1 | tee "$log"; then
		# Go's fuzzing engine can end a run with "context deadline
		# exceeded" and no failing input when -fuzztime runs out while a
		# worker is still busy with a slow input; that is no finding.
		# Such a run is tried once more; a real finding writes its input.
		if grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
			echo "fuzz: $name ended on the fuzzing deadline with no failing input; running it once more"
			$go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"
		else
			rm -f "$log"
			exit 1
		fi
	fi
	rm -f "$log"
	count=$((count + 1))
done < <(git grep --untracked -o -E '^func Fuzz[A-Za-z0-9_]+' -- '*_test.go' | sed -E 's/:func /:/' | sort)
if [ "$count" -eq 0 ]; then
	echo "fuzz: no fuzz targets found" >&2
	exit 1
fi
echo "fuzz: $count targets, $fuzztime each"
