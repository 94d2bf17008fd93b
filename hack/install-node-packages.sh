#!/usr/bin/env bash
# Installs the host packages the test bed's real nodes run (make
# node-packages, part of make testbed), from Debian, when any is missing:
# containerd (containerd, ctr), runc, containernetworking-plugins (bridge,
# host-local, loopback, ptp, portmap in /usr/lib/cni), iptables, conntrack,
# nftables (nft, for kube-proxy in nftables mode).
# A no-op when all are present. Needs root and apt-get.
set -euo pipefail

packages=(containerd runc containernetworking-plugins iptables conntrack nftables)

# present FILE: an executable found on PATH, in an sbin folder (absent from
# the PATH of many non-root shells), or at an absolute path.
present() {
	case $1 in
	/*) [[ -x $1 ]] ;;
	*) command -v "$1" >/dev/null 2>&1 || [[ -x /usr/sbin/$1 || -x /sbin/$1 ]] ;;
	esac
}

missing=()
for f in containerd ctr runc iptables conntrack nft /usr/lib/cni/bridge /usr/lib/cni/host-local /usr/lib/cni/loopback /usr/lib/cni/ptp /usr/lib/cni/portmap; do
	present "$f" || missing+=("$f")
done
if ((${#missing[@]} == 0)); then
	echo "node-packages: present (${packages[*]})"
	exit 0
fi
echo "node-packages: missing ${missing[*]}; installing ${packages[*]} from Debian"
if [[ $(id -u) != 0 ]]; then
	echo "node-packages: needs root to install ${packages[*]}: run as root, or install them yourself (apt-get install ${packages[*]})" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "node-packages: apt-get not found: install ${packages[*]} with this system's package manager (missing: ${missing[*]})" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
install() { apt-get install -y --no-install-recommends "${packages[@]}"; }
# The package lists are refreshed only when the install fails with the ones
# at hand (typically none yet on a fresh CI image).
if ! install; then
	echo "node-packages: install failed; running apt-get update and trying again"
	apt-get update
	install
fi
still=()
for f in "${missing[@]}"; do
	present "$f" || still+=("$f")
done
if ((${#still[@]} > 0)); then
	echo "node-packages: still missing after the install: ${still[*]}" >&2
	exit 1
fi
echo "node-packages: installed ${packages[*]}"
