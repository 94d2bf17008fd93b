package discovery

import (
	"fmt"
	"io"
)

// zoneTTL is the TTL of the records written for a unicast zone.
const zoneTTL = 300

// WriteZone writes a's records in domain as zone-file lines, for an
// administrator to add to the zone (or to feed to nsupdate).
func WriteZone(w io.Writer, a Advertisement, domain string) error {
	rrs, err := a.Records(domain, zoneTTL)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "; ferry cluster %s, DNS-SD service %s\n", a.ClusterID, ServiceDomain(domain)); err != nil {
		return err
	}
	for _, rr := range rrs {
		if _, err := fmt.Fprintln(w, rr.String()); err != nil {
			return err
		}
	}
	return nil
}
