package node

import (
	"strings"
	"testing"
	"time"
)

func TestOptionsValidate(t *testing.T) {
	named := func(o Options) Options {
		o.VirtualNodeNamespace, o.VirtualNodeName = "ferry-system", "provider-a"
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
		{name: "names required", opts: Options{}, wantErr: []string{"--virtual-node-namespace is required", "--virtual-node-name is required"}},
		{
			name:    "timeout above period",
			opts:    named(Options{HealthCheckPeriod: 5 * time.Second, HealthCheckTimeout: 10 * time.Second}),
			wantErr: []string{"--health-check-timeout (10s) must not exceed --health-check-period (5s)"},
		},
		{name: "negative period", opts: named(Options{HealthCheckPeriod: -time.Second}), wantErr: []string{"--health-check-period (-1s) must be positive"}},
		{name: "negative timeout", opts: named(Options{HealthCheckTimeout: -time.Second}), wantErr: []string{"--health-check-timeout (-1s) must be positive"}},
		{name: "threshold", opts: named(Options{FailureThreshold: -1}), wantErr: []string{"--health-check-failure-threshold (-1) must be at least 1"}},
		{name: "lease", opts: named(Options{LeaseDurationSeconds: 3}), wantErr: []string{"--lease-duration-seconds (3) must be at least 4"}},
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
	if d.HealthCheckPeriod != 10*time.Second || d.HealthCheckTimeout != 5*time.Second || d.FailureThreshold != 3 || d.LeaseDurationSeconds != 40 {
		t.Errorf("defaults = %+v", d)
	}
	if d := (Options{HealthCheckPeriod: 2 * time.Second}).withDefaults(); d.HealthCheckTimeout != 2*time.Second {
		t.Errorf("default timeout with a 2s period = %s, want 2s", d.HealthCheckTimeout)
	}
}
