#!/usr/bin/env bash
# Fails when the generated deepcopy code, CRD manifests, roles, chart
# templates or reference pages (docs/reference, but the hand-written
# annotations.md) are stale: it runs
# `make generate` and reports every generated file that changed (or appeared,
# or vanished). The tree is left regenerated, ready to commit.
set -euo pipefail
cd "$(dirname "$0")/.."
generated() { find api manifests/crds manifests/rbac/controller-manager manifests/rbac/virtual-kubelet manifests/rbac/webhook manifests/rbac/gateway charts/ferry/templates docs/reference -type f \( -name 'zz_generated.*' -o -path 'manifests/crds/*' -o -path 'manifests/rbac/*/role.yaml' -o \( -path 'charts/ferry/templates/*.yaml' -a ! -name validate.yaml \) -o \( -path 'docs/reference/*' -a ! -path docs/reference/annotations.md \) \) 2>/dev/null | sort; }
snapshot() { for f in $(generated); do sha256sum "$f"; done; }
before=$(snapshot)
make --no-print-directory generate >/dev/null
after=$(snapshot)
if [ "$before" != "$after" ]; then
  echo "generated files were stale; 'make generate' changed:" >&2
  diff <(echo "$before") <(echo "$after") | grep '^[<>]' | awk '{print "  " $3}' | sort -u >&2
  echo "commit the regenerated files." >&2
  exit 1
fi
echo "generated files are up to date"
