// Package discovery finds ferry clusters that advertise their peering
// endpoint by DNS service discovery (DNS-SD, RFC 6763): in a unicast DNS
// domain through a DNS server, or on the local link by multicast DNS (mDNS,
// RFC 6762). It also answers for a cluster on the local link and writes the
// records an administrator adds to a DNS zone. It finds where a cluster's
// API server is and which CA signs it; it never carries credentials.
//
// # Record format
//
// The service type is _ferry._tcp. One instance per cluster, named by its
// cluster ID:
//
//	_ferry._tcp.<domain>.          PTR <id>._ferry._tcp.<domain>.
//	<id>._ferry._tcp.<domain>.     SRV 0 0 <port> <host>.
//	<id>._ferry._tcp.<domain>.     TXT "txtvers=1" "id=<id>" "ca=sha256:<hex>" "version=<v>"
//	_services._dns-sd._udp.<domain>. PTR _ferry._tcp.<domain>.
//
// The SRV record names the API server: its endpoint is https://<host>:<port>.
// On the local link (domain local.) an API server reached by IP address is
// published as host <id>.local. with A/AAAA records, and a browser uses that
// address in the endpoint, since .local names do not resolve through
// ordinary DNS; a host outside local. is used by name. In a unicast domain
// the host must be a name (the API server's certificate must cover it).
//
// TXT keys (RFC 6763 section 6: case-insensitive, the first of a repeated key
// counts, unknown keys are ignored):
//
//	txtvers  required, "1": this format
//	id       required: the cluster ID (a DNS-1123 label), as ferry-controller-manager --cluster-id
//	ca       required: "sha256:" and the 64 lowercase hex digits of the SHA-256 of the DER of
//	         the API server's CA certificate (the first in the kubeconfig's bundle)
//	version  optional: the advertiser's ferry version, for display
//
// An instance whose records break these rules is skipped with an error that
// names the record and field; the other instances are still returned.
package discovery
