package nettest

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

func TestTranslate(t *testing.T) {
	for _, tc := range []struct{ ip, from, to, want, err string }{
		{"10.244.1.17", "10.244.0.0/16", "10.71.0.0/16", "10.71.1.17", ""},
		{"10.244.0.130", "10.244.0.0/25", "10.70.3.0/25", "", "not in"},
		{"10.244.0.100", "10.244.0.0/25", "10.70.3.128/25", "10.70.3.228", ""},
		{"10.244.7.9", "10.244.0.0/20", "172.16.16.0/20", "172.16.23.9", ""},
		{"10.244.1.17", "10.244.0.0/16", "10.71.0.0/17", "", "differ in size"},
		{"10.244.1.17", "10.244.0.0/16", "", "", "range \"\""},
		{"fd00::5", "fd00::/64", "fd01:0:0:1::/64", "fd01:0:0:1::5", ""},
		{"10.244.1.17", "10.244.0.0/16", "fd00::/112", "", "differ in size"},
		{"nope", "10.244.0.0/16", "10.71.0.0/16", "", "address \"nope\""},
	} {
		got, err := Translate(tc.ip, tc.from, tc.to)
		switch {
		case tc.err != "" && (err == nil || !contains(err.Error(), tc.err)):
			t.Errorf("Translate(%s, %s, %s) = %q, %v; want an error saying %q", tc.ip, tc.from, tc.to, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("Translate(%s, %s, %s) = %q, %v; want %s", tc.ip, tc.from, tc.to, got, err, tc.want)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// FuzzTranslate: a translated address is in the target range, and
// translating it back gives the address.
func FuzzTranslate(f *testing.F) {
	f.Add("10.244.1.17", "10.244.0.0/16", "10.71.0.0/16")
	f.Add("10.244.0.100", "10.244.0.0/25", "10.70.3.128/25")
	f.Add("fd00::5", "fd00::/64", "fd01:0:0:1::/64")
	f.Fuzz(func(t *testing.T, ip, from, to string) {
		got, err := Translate(ip, from, to)
		if err != nil {
			return
		}
		a := netip.MustParseAddr(got)
		if !netip.MustParsePrefix(to).Masked().Contains(a) {
			t.Fatalf("Translate(%q, %q, %q) = %s, outside %s", ip, from, to, got, to)
		}
		back, err := Translate(got, to, from)
		if err != nil {
			t.Fatalf("back: %v", err)
		}
		if back != netip.MustParseAddr(ip).String() {
			t.Fatalf("Translate(%q, %q, %q) = %s, back %s", ip, from, to, got, back)
		}
	})
}

func TestParseDialAnswer(t *testing.T) {
	a, err := ParseDialAnswer(http.StatusOK, []byte(`{"responses":["away-0"]}`))
	if err != nil || len(a.Responses) != 1 || a.Responses[0] != "away-0" {
		t.Errorf("200: %+v, %v", a, err)
	}
	a, err = ParseDialAnswer(http.StatusExpectationFailed, []byte(`{"errors":["timeout"]}`))
	if err != nil || len(a.Errors) != 1 {
		t.Errorf("417: %+v, %v", a, err)
	}
	a, err = ParseDialAnswer(http.StatusBadRequest, []byte("host and/or port param are invalid. lookup home: no such host\n"))
	if err != nil || len(a.Errors) != 1 || !IsDNSError(a.Errors[0]) {
		t.Errorf("400 DNS: %+v, %v", a, err)
	}
	for status, body := range map[int]string{http.StatusOK: `{}`, http.StatusExpectationFailed: `not json`, http.StatusInternalServerError: `boom`} {
		if _, err := ParseDialAnswer(status, []byte(body)); err == nil {
			t.Errorf("HTTP %d %q: no error", status, body)
		}
	}
}

// FuzzParseDialAnswer: any answer is either an error or carries at least
// one response or error, never a panic.
func FuzzParseDialAnswer(f *testing.F) {
	f.Add(200, []byte(`{"responses":["a"]}`))
	f.Add(417, []byte(`{"errors":["x"]}`))
	f.Add(400, []byte("bad"))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		a, err := ParseDialAnswer(status, body)
		if err == nil && len(a.Responses)+len(a.Errors) == 0 {
			t.Fatalf("HTTP %d %q: no error and nothing in %+v", status, body, a)
		}
	})
}
