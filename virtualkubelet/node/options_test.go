package node

import (
	"strings"
	"testing"
	"time"
)

func TestOptionsValidate(t *testing.T) {
	named := func(o Options) Options {
		o.VirtualNodeNamespace, o.VirtualNodeName = "ferry-system", "provider-a"
		if o.NodeIP == "" && o.KubeletAddress == "" {
			o.NodeIP = "10.1.2.3" // as a Deployment passes the pod's IP
		}
		return o
	}
	tests := []struct {
		name    string
		opts    Options
		wantErr []string // substrings; none: valid
	}{
		{name: "defaults", opts: named(Options{})},
		{name: "explicit", opts: named(Options{HealthCheckPeriod: time.Second, HealthCheckTimeout: time.Second, FailureThreshold: 1, LeaseDurationSeconds: 4})},
		{name: "short period takes the timeout down with it", opts: named(Options{HealthCheckPeriod: time.Second})},
		{name: "names required", opts: Options{NodeIP: "10.1.2.3"}, wantErr: []string{"--virtual-node-namespace is required", "--virtual-node-name is required"}},
		{name: "loopback kubelet API advertises its own address", opts: named(Options{KubeletAddress: "127.0.0.1:0"})},
		{name: "node IP required on every address", opts: named(Options{KubeletAddress: "0.0.0.0:10250"}), wantErr: []string{"--node-ip is required when --kubelet-address (0.0.0.0:10250)"}},
		{name: "node IP not an IP", opts: named(Options{NodeIP: "node-a"}), wantErr: []string{`--node-ip "node-a": must be a unicast IP address`}},
		{name: "kubelet address without port", opts: named(Options{KubeletAddress: "127.0.0.1"}), wantErr: []string{`--kubelet-address "127.0.0.1": must be host:port`}},
		{name: "kubelet address bad port", opts: named(Options{KubeletAddress: "127.0.0.1:http"}), wantErr: []string{`port "http" must be a number`}},
		{name: "kubelet address host name", opts: named(Options{KubeletAddress: "localhost:10250", NodeIP: "127.0.0.1"}), wantErr: []string{`host "localhost" must be an IP address`}},
		{name: "certificate without key", opts: named(Options{KubeletTLSCertFile: "/tls.crt"}), wantErr: []string{"--kubelet-tls-cert-file and --kubelet-tls-key-file go together"}},
		{
			name:    "timeout above period",
			opts:    named(Options{HealthCheckPeriod: 5 * time.Second, HealthCheckTimeout: 10 * time.Second}),
			wantErr: []string{"--health-check-timeout (10s) must not exceed --health-check-period (5s)"},
		},
		{name: "negative period", opts: named(Options{HealthCheckPeriod: -time.Second}), wantErr: []string{"--health-check-period (-1s) must be positive"}},
		{name: "negative timeout", opts: named(Options{HealthCheckTimeout: -time.Second}), wantErr: []string{"--health-check-timeout (-1s) must be positive"}},
		{name: "threshold", opts: named(Options{FailureThreshold: -1}), wantErr: []string{"--health-check-failure-threshold (-1) must be at least 1"}},
		{name: "remote scope", opts: named(Options{RemoteScope: "everywhere"}), wantErr: []string{`--remote-scope "everywhere" must be auto, cluster or namespace`}},
		{name: "lease", opts: named(Options{LeaseDurationSeconds: 3}), wantErr: []string{"--lease-duration-seconds (3) must be at least 4"}},
		{name: "status report", opts: named(Options{NodeStatusReportFrequency: -time.Second}), wantErr: []string{"--node-status-report-frequency (-1s) must be positive"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors %q", tt.wantErr)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Validate() = %q, want it to contain %q", err, want)
				}
			}
		})
	}
}

func TestOptionsDefaults(t *testing.T) {
	d := Options{}.withDefaults()
	if d.HealthCheckPeriod != 10*time.Second || d.HealthCheckTimeout != 5*time.Second || d.FailureThreshold != 3 || d.LeaseDurationSeconds != 40 || d.NodeStatusReportFrequency != 5*time.Minute {
		t.Errorf("defaults = %+v", d)
	}
	if d := (Options{HealthCheckPeriod: 2 * time.Second}).withDefaults(); d.HealthCheckTimeout != 2*time.Second {
		t.Errorf("default timeout with a 2s period = %s, want 2s", d.HealthCheckTimeout)
	}
}
