// Package binaries builds and locates the programs the test bed runs: the
// control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kubectl and kwok) and what real nodes add (kubelet,
// kube-proxy, CoreDNS, kube-network-policies, and agnhost, Kubernetes' e2e
// test image, the nodes' workload and sandbox). They are compiled from the Go
// module proxy at the versions pinned in ferry's go.mod (as Go tool
// dependencies; CoreDNS and kube-network-policies in the nested modules
// coredns/ and netpol/, so that their dependencies do not move ferry's) into a
// versioned cache folder, so a fresh machine needs nothing but Go, and a warm
// one rebuilds nothing.
package binaries

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Versions of the programs the test bed runs. They must equal the versions
// go.mod pins; TestVersionsMatchGoMod keeps them honest.
const (
	KubernetesVersion = "v1.36.4"
	EtcdVersion       = "v3.6.16"
	KwokVersion       = "v0.8.0"
	// CoreDNSVersion is the version coredns/go.mod pins.
	CoreDNSVersion = "v1.15.0"
)

// EnvDir overrides the folder the binaries are built into and read from.
const EnvDir = "FERRY_TESTBED_BIN"

// Program names, as files in Dir().
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kubectl               = "kubectl"
	Kwok                  = "kwok"

	Kubelet   = "kubelet"
	KubeProxy = "kube-proxy"
	// Agnhost is static (built without cgo), to run alone in an image.
	Agnhost = "agnhost"
	// CoreDNS is static, to run alone in an image.
	CoreDNS = "coredns"
	// KubeNetworkPolicies is SIG Network's NetworkPolicy engine
	// (sigs.k8s.io/kube-network-policies, its controller unchanged) with
	// the nested module's command that queues packets to it with the
	// xtables NFQUEUE target, for kernels without the nft queue expression.
	KubeNetworkPolicies = "kube-network-policies"
)

// Set is a group of programs, ensured together.
type Set uint

const (
	// ControlPlane is what every test-bed cluster runs.
	ControlPlane Set = 1 << iota
	// Node is what real nodes add: kubelet, kube-proxy, agnhost, coredns.
	Node
	// All is every program.
	All = ControlPlane | Node
)

// netpolModule is the nested module, relative to ferry's module root, that
// pins sigs.k8s.io/kube-network-policies and holds the command running it.
const netpolModule = "test/testbed/binaries/netpol"

// coreDNSModule is the nested module, relative to ferry's module root, that
// pins CoreDNS.
const coreDNSModule = "test/testbed/binaries/coredns"

// program is one binary and the Go package it is built from.
type program struct {
	name string
	pkg  string
	// cold is the rough cold build time on 2 cores, shown as progress;
	// the node programs' measured in one empty build cache, in this order.
	cold time.Duration
	set  Set
	// static builds with CGO_ENABLED=0, for a binary alone in an image.
	static bool
	// module is the folder of the go.mod pinning pkg, relative to ferry's
	// module root; empty for ferry's own.
	module string
}

var programs = []program{
	{name: Etcd, pkg: "go.etcd.io/etcd/server/v3", cold: time.Minute, set: ControlPlane},
	{name: KubeAPIServer, pkg: "k8s.io/kubernetes/cmd/kube-apiserver", cold: 5 * time.Minute, set: ControlPlane},
	{name: KubeControllerManager, pkg: "k8s.io/kubernetes/cmd/kube-controller-manager", cold: time.Minute, set: ControlPlane},
	{name: KubeScheduler, pkg: "k8s.io/kubernetes/cmd/kube-scheduler", cold: 30 * time.Second, set: ControlPlane},
	{name: Kubectl, pkg: "k8s.io/kubernetes/cmd/kubectl", cold: 30 * time.Second, set: ControlPlane},
	{name: Kwok, pkg: "sigs.k8s.io/kwok/cmd/kwok", cold: 30 * time.Second, set: ControlPlane},
	{name: Kubelet, pkg: "k8s.io/kubernetes/cmd/kubelet", cold: 7*time.Minute + 30*time.Second, set: Node},
	{name: KubeProxy, pkg: "k8s.io/kubernetes/cmd/kube-proxy", cold: 40 * time.Second, set: Node},
	{name: Agnhost, pkg: "k8s.io/kubernetes/test/images/agnhost", cold: 3 * time.Minute, set: Node, static: true},
	{name: CoreDNS, pkg: "github.com/coredns/coredns", cold: 3*time.Minute + 30*time.Second, set: Node, static: true, module: coreDNSModule},
	{name: KubeNetworkPolicies, pkg: "github.com/ferry-io/ferry/test/testbed/binaries/netpol", cold: 4 * time.Minute, set: Node, module: netpolModule},
}

// Names lists every program the test bed can run.
func Names() []string { return NamesOf(All) }

// NamesOf lists the programs of set.
func NamesOf(set Set) []string {
	var names []string
	for _, p := range programs {
		if p.set&set != 0 {
			names = append(names, p.name)
		}
	}
	return names
}

// Dir is the versioned cache folder holding the binaries:
// $FERRY_TESTBED_BIN, or ${XDG_CACHE_HOME:-$HOME/.cache}/ferry/testbed/<versions>.
func Dir() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		return filepath.Abs(d)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("locate the user cache folder (set %s to choose one): %w", EnvDir, err)
	}
	tag := fmt.Sprintf("kubernetes-%s_etcd-%s_kwok-%s", KubernetesVersion, EtcdVersion, KwokVersion)
	return filepath.Join(cache, "ferry", "testbed", tag), nil
}

// Path returns the path of one program, or an error telling how to build it
// when it is missing.
func Path(name string) (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("test bed binary %s is missing from %s: run `make testbed` first", name, dir)
		}
		return "", fmt.Errorf("stat test bed binary %s: %w", p, err)
	}
	return p, nil
}

// Ensure builds every missing program, control plane and node, into Dir(),
// printing progress to out. It is a no-op when all of them are present.
// moduleRoot is the folder of ferry's go.mod, whose tool dependencies pin the
// versions.
func Ensure(ctx context.Context, moduleRoot string, out io.Writer) error {
	return EnsureSet(ctx, moduleRoot, All, out)
}

// EnsureSet is Ensure for the programs of set only.
func EnsureSet(ctx context.Context, moduleRoot string, set Set, out io.Writer) error {
	dir, err := Dir()
	if err != nil {
		return err
	}
	var missing []program
	for _, p := range programs {
		if p.set&set == 0 {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, p.name)); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		fmt.Fprintf(out, "testbed: binaries present in %s\n", dir)
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create test bed binary folder: %w", err)
	}
	var cold time.Duration
	for _, p := range missing {
		cold += p.cold
	}
	fmt.Fprintf(out, "testbed: building %d binaries into %s (cold: about %s, once)\n", len(missing), dir, cold)
	start := time.Now()
	for i, p := range missing {
		fmt.Fprintf(out, "testbed: [%d/%d] %s from %s (cold: ~%s)\n", i+1, len(missing), p.name, p.pkg, p.cold)
		t := time.Now()
		if err := build(ctx, moduleRoot, dir, p); err != nil {
			return err
		}
		fmt.Fprintf(out, "testbed: [%d/%d] %s built in %s\n", i+1, len(missing), p.name, time.Since(t).Round(time.Second))
	}
	fmt.Fprintf(out, "testbed: all binaries built in %s\n", time.Since(start).Round(time.Second))
	return nil
}

// build compiles one program to a temporary name and renames it into place,
// so an interrupted build never leaves a truncated binary that looks usable.
func build(ctx context.Context, moduleRoot, dir string, p program) error {
	tmp := filepath.Join(dir, "."+p.name+".tmp")
	ldflags := strings.Join([]string{
		"-s", "-w",
		"-X k8s.io/component-base/version.gitVersion=" + KubernetesVersion,
		"-X k8s.io/component-base/version.gitMajor=" + major(KubernetesVersion),
		"-X k8s.io/component-base/version.gitMinor=" + minor(KubernetesVersion),
		"-X k8s.io/component-base/version.gitTreeState=clean",
	}, " ")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", tmp, p.pkg)
	cmd.Dir = filepath.Join(moduleRoot, p.module)
	if p.static {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	}
	var stderr strings.Builder
	cmd.Stdout = io.Discard
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("build %s from %s (in %s): %w\n%s", p.name, p.pkg, cmd.Dir, err, stderr.String())
	}
	if err := os.Rename(tmp, filepath.Join(dir, p.name)); err != nil {
		return fmt.Errorf("install %s: %w", p.name, err)
	}
	return nil
}

func major(v string) string {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	return parts[0]
}

func minor(v string) string {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return ""
	}
	return parts[1]
}
