package app

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ferry-io/ferry/fabric/nettest"
)

func TestPrintNetworkReport(t *testing.T) {
	r := &nettest.Report{Cluster: "home", Checks: []nettest.Check{
		{Path: nettest.PathPod, From: "home", To: "eu", Target: "pod 10.71.0.5", Cross: true, Passed: true, Latency: "420µs", LatencyMicros: 420},
		{Path: nettest.PathMTU, From: "eu", To: "home", Target: "1340-byte datagram to 10.72.0.9", Cross: true, Cause: nettest.CauseMTU, Detail: "small packets pass on this path"},
	}}
	var out bytes.Buffer
	if err := printNetworkReport(&out, &output{format: outputTable}, r); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("want header, 2 rows, a blank line and 1 failure, got:\n%s", out.String())
	}
	for i, want := range [][]string{
		{"PATH", "FROM", "TO", "TARGET", "RESULT", "LATENCY", "CAUSE"},
		{"pod-to-pod", "home", "eu", "pod 10.71.0.5", "ok", "420µs", "-"},
		{"mtu-udp", "eu", "home", "FAIL", "MTU"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i, lines[i], w)
			}
		}
	}
	if !strings.HasPrefix(lines[4], "mtu-udp eu → home (1340-byte datagram to 10.72.0.9): MTU: small packets pass") {
		t.Errorf("failure line %q", lines[4])
	}

	out.Reset()
	if err := printNetworkReport(&out, &output{format: outputJSON}, r); err != nil {
		t.Fatal(err)
	}
	var back nettest.Report
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || len(back.Checks) != 2 || back.Checks[1].Cause != nettest.CauseMTU || back.Checks[0].LatencyMicros != 420 {
		t.Errorf("-o json round trip: %+v, %v\n%s", back, err, out.String())
	}
}

func TestTestNetworkRefusesBadFlags(t *testing.T) {
	for args, want := range map[string]string{
		"-o name":                       "-o name",
		"--check-timeout 0s":            "--check-timeout 0s: must be positive",
		"--image-pull-policy Sometimes": "--image-pull-policy",
		"--image=":                      "--image: must not be empty",
	} {
		cmd := NewCommand()
		cmd.SetArgs(append([]string{"test", "network", "--kubeconfig", "/nonexistent"}, strings.Fields(args)...))
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", args, err, want)
		}
	}
}
