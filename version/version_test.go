package version

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-11-25T18:00:00Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	got := fromBuildInfo(Info{}, bi)
	if got.Version != "" || got.Commit != "abc123-dirty" || got.CommitTime != "2026-11-25T18:00:00Z" {
		t.Errorf("from a dirty checkout: %+v", got)
	}
	got = fromBuildInfo(Info{Version: "v0.3.0"}, &debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}})
	if got.Version != "v0.3.0" {
		t.Errorf("the linked version %q lost to the module's", got.Version)
	}
	got = fromBuildInfo(Info{}, &debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}})
	if got.Version != "v0.2.0" || got.Commit != "" {
		t.Errorf("from a module download: %+v", got)
	}
}

func TestStringAndMetric(t *testing.T) {
	i := Info{Version: "v0.3.0", GoVersion: "go1.26.0", Platform: "linux/amd64"}
	if got, want := i.String(), "v0.3.0 (commit unknown, go1.26.0, linux/amd64)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	c := Collector("ferry-webhook")
	if n := testutil.CollectAndCount(c, "ferry_build_info"); n != 1 {
		t.Fatalf("ferry_build_info has %d series, want 1", n)
	}
	want := `# HELP ferry_build_info A metric with a constant '1' value labelled by the version, commit and Go version of the ferry component.
# TYPE ferry_build_info gauge
ferry_build_info{commit="` + Get().Commit + `",component="ferry-webhook",go_version="` + Get().GoVersion + `",version="` + Get().Version + `"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// TestLinkedVersion builds ferryctl as make does, with the version linked
// in, and reads it back from --version and `ferryctl version -o json`.
func TestLinkedVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ferryctl")
	}
	bin := filepath.Join(t.TempDir(), "ferryctl")
	build := exec.CommandContext(t.Context(), "go", "build", "-ldflags", "-X github.com/ferry-io/ferry/version.version=v9.8.7-test -X github.com/ferry-io/ferry/version.commit=0123abc", "-o", bin, "./cmd/ferryctl")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build ferryctl: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(t.Context(), bin, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "ferryctl version v9.8.7-test (commit 0123abc, ") {
		t.Errorf("ferryctl --version: %q, %v", out, err)
	}
	out, err = exec.CommandContext(t.Context(), bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("ferryctl version -o json: %v", err)
	}
	var info Info
	if err := json.Unmarshal(out, &info); err != nil || info.Version != "v9.8.7-test" || info.Commit != "0123abc" || info.GoVersion == "" || info.Platform == "" {
		t.Errorf("ferryctl version -o json: %+v, %v (%s)", info, err, out)
	}
}
