// Package install applies ferry's objects to a cluster and removes them again:
// server-side apply in dependency order (CRDs established before anything
// else, admission configurations last), an inventory of what was applied
// (the ConfigMap ferry-install) so that a later install prunes what it no
// longer renders and uninstall removes exactly what install made, readiness
// waits computed by kstatus, and a progress line per step. ferryctl install
// and uninstall are its command line; the objects come from the Helm chart.
package install
