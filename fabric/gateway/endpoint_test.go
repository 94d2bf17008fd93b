package gateway

import (
	"strings"
	"testing"
)

func TestParseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		in   string
		host string
		port int32
	}{
		{"203.0.113.7:51820", "203.0.113.7", 51820},
		{"gw.example.com:1", "gw.example.com", 1},
		{"[fd00::7]:65535", "fd00::7", 65535},
		{"gw:051820", "gw", 51820},
	} {
		host, port, err := ParseEndpoint(tc.in)
		if err != nil || host != tc.host || port != tc.port {
			t.Errorf("ParseEndpoint(%q) = %q, %d, %v; want %q, %d", tc.in, host, port, err, tc.host, tc.port)
		}
	}
	for in, want := range map[string]string{
		"203.0.113.7":                     "want address:port",
		"203.0.113.7:0":                   "not a port number",
		"203.0.113.7:65536":               "not a port number",
		"203.0.113.7:-1":                  "not a port number",
		":51820":                          "neither an IP address nor a DNS name",
		"Gw.Example:51820":                "neither an IP address nor a DNS name",
		"gw_1:51820":                      "neither an IP address nor a DNS name",
		"fd00::7:51820":                   "want address:port",
		"[1.2.3.4]:51820":                 "only an IPv6 address is written in brackets",
		"[gw]:51820":                      "only an IPv6 address is written in brackets",
		"[fe80::1%eth0]:5182":             "zone",
		strings.Repeat("a.", 127) + "a:1": "neither an IP address nor a DNS name",
	} {
		if _, _, err := ParseEndpoint(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseEndpoint(%q) = %v, want an error containing %q", in, err, want)
		}
	}
}
