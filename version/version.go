// Package version says which build of ferry a binary is: its version (set at
// link time by make, e.g. v0.3.0 or a git describe), the commit and commit
// time Go records from the checkout it was built in, and the Go version. Every
// ferry binary prints it with --version (ferryctl: `ferryctl version`) and
// exports it as the ferry_build_info metric.
package version

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
)

// version is the release version, set by the linker:
//
//	go build -ldflags "-X github.com/ferry-io/ferry/version.version=v0.3.0"
//
// make sets it from `git describe --tags --always --dirty`.
var version string

// commit is the source revision, set by the linker as version is; when
// empty, the revision Go recorded from the checkout (not with
// -buildvcs=false).
var commit string

// Info is one build's identity.
type Info struct {
	// Version is the release version the build was linked with, else the
	// module version Go recorded, else "devel".
	Version string `json:"version"`
	// Commit is the VCS revision of the source tree, with "-dirty" when it
	// had uncommitted changes; empty when Go recorded none (go test,
	// go run outside a checkout).
	Commit string `json:"commit,omitempty"`
	// CommitTime is that revision's time (RFC 3339).
	CommitTime string `json:"commitTime,omitempty"`
	// GoVersion and Platform are the toolchain and target.
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get reads this binary's Info.
func Get() Info {
	info := Info{Version: version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		info = fromBuildInfo(info, bi)
	}
	if commit != "" {
		info.Commit = commit
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	return info
}

func fromBuildInfo(info Info, bi *debug.BuildInfo) Info {
	if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.time":
			info.CommitTime = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && info.Commit != "" {
		info.Commit += "-dirty"
	}
	return info
}

// Dependency is the version of module path this binary was built with, or
// "unknown".
func Dependency(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "unknown"
}

// String is the one line --version prints.
func (i Info) String() string {
	commit := i.Commit
	if commit == "" {
		commit = "unknown"
	}
	return fmt.Sprintf("%s (commit %s, %s, %s)", i.Version, commit, i.GoVersion, i.Platform)
}

// Collector exports Info as ferry_build_info, a gauge of 1 labelled with
// the version, commit and Go version, as kube components export
// kubernetes_build_info.
func Collector(component string) prometheus.Collector {
	i := Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ferry_build_info",
		Help: "A metric with a constant '1' value labelled by the version, commit and Go version of the ferry component.",
		ConstLabels: prometheus.Labels{
			"component": component, "version": i.Version, "commit": i.Commit, "go_version": i.GoVersion,
		},
	})
	g.Set(1)
	return g
}

// Flag is a binary's --version flag.
type Flag struct{ show *bool }

// AddFlag adds --version to fs.
func AddFlag(fs *pflag.FlagSet) Flag {
	return Flag{show: fs.Bool("version", false, "print the version, commit and Go version, and exit")}
}

// ExitIfSet prints "<binary> <Info>" and exits when --version was given;
// call it after parsing.
func (f Flag) ExitIfSet(binary string) {
	if f.show != nil && *f.show {
		fmt.Println(binary, Get())
		os.Exit(0)
	}
}
