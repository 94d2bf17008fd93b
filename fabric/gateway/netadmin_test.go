package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/fabric/netns"
	"github.com/ferry-io/ferry/test/netlab"
)

// netAdminEnv runs TestNetAdminOnlyHelper in a child made by
// runWithNetAdminOnly; its value is the prefix of the links to make.
// netAdminStageEnv says which of the helper's two stages runs.
const (
	netAdminEnv      = "FERRY_GATEWAY_NETADMIN_HELPER"
	netAdminStageEnv = "FERRY_GATEWAY_NETADMIN_STAGE"
)

// TestGatewayAndRouteAgentNeedOnlyNetAdmin runs the gateway's and the route
// agent's namespace work as they run in their containers: in the process's
// own network namespace (a fresh one here), as root with NET_ADMIN and
// NET_RAW only, without the CAP_SYS_ADMIN that entering a namespace
// (setns) needs, and with /proc/sys read-only, as the container runtime
// mounts it.
func TestGatewayAndRouteAgentNeedOnlyNetAdmin(t *testing.T) {
	netlab.Require(t)
	out, err := runWithNetAdminOnly(t, netlab.Prefix()+"c")
	if err != nil {
		t.Fatalf("the child with NET_ADMIN and NET_RAW only: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("NETADMIN-OK")) {
		t.Fatalf("the child did not finish its work:\n%s", out)
	}
}

// runWithNetAdminOnly runs TestNetAdminOnlyHelper in a new process, in new
// network and mount namespaces. Its first stage mounts /proc/sys
// read-only, cuts its capability bounding set to NET_ADMIN and NET_RAW (on
// its thread: the bounding set is per thread) and executes the test binary
// again, which as root then has those two capabilities and no other.
func runWithNetAdminOnly(t *testing.T, prefix string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command("/proc/self/exe", "-test.run=^TestNetAdminOnlyHelper$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), netAdminEnv+"="+prefix, netAdminStageEnv+"=setup")
	// Unsharing the mount namespace makes every mount private (Go does):
	// nothing the child mounts reaches the test's namespace.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Pdeathsig is per thread: the thread that starts the child waits.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		out, err := cmd.CombinedOutput()
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		return r.out, r.err
	case <-time.After(2 * time.Minute):
		t.Fatal("the child with NET_ADMIN only did not finish in 2 minutes")
		return nil, nil
	}
}

// becomeContainer is the helper's first stage: /proc/sys read-only, then
// the test binary again with NET_ADMIN and NET_RAW only.
func becomeContainer(t *testing.T) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		t.Fatalf("make mounts private: %v", err)
	}
	if err := unix.Mount("/proc/sys", "/proc/sys", "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		t.Fatalf("bind /proc/sys: %v", err)
	}
	if err := unix.Mount("", "/proc/sys", "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("mount /proc/sys read-only: %v", err)
	}
	last, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		t.Fatal(err)
	}
	lastCap, err := strconv.Atoi(strings.TrimSpace(string(last)))
	if err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread() // never unlocked: this thread executes the next stage
	for c := 0; c <= lastCap; c++ {
		if c == unix.CAP_NET_ADMIN || c == unix.CAP_NET_RAW || c == unix.CAP_SETPCAP {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			t.Fatalf("drop capability %d from the bounding set: %v", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAPBSET_DROP, unix.CAP_SETPCAP, 0, 0, 0); err != nil {
		t.Fatalf("drop CAP_SETPCAP from the bounding set: %v", err)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, netAdminStageEnv+"=") })
	env = append(env, netAdminStageEnv+"=run")
	err = syscall.Exec("/proc/self/exe", os.Args, env)
	t.Fatalf("execute the next stage: %v", err)
}

// TestNetAdminOnlyHelper is not a test: runWithNetAdminOnly runs it in a
// child with NET_ADMIN and NET_RAW only and a read-only /proc/sys, where it
// installs a gateway's data plane and a node's routes in its own namespace
// and removes them.
func TestNetAdminOnlyHelper(t *testing.T) {
	prefix := os.Getenv(netAdminEnv)
	if prefix == "" {
		t.Skip("only run by runWithNetAdminOnly")
	}
	if os.Getenv(netAdminStageEnv) == "setup" {
		becomeContainer(t)
		return
	}
	checkCapabilities(t)

	ns, err := netns.Open("") // as ferry-gateway opens it without --netns
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	// An underlay: a veth pair, both ends here, an address and a default
	// route (nothing leaves the namespace).
	under := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: prefix + "u", MTU: 1500}, PeerName: prefix + "p"}
	if err := netlink.LinkAdd(under); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: prefix + "p"}}); err != nil {
		t.Fatal(err)
	}
	if err := netlink.AddrAdd(under, &netlink.Addr{IPNet: ipNetOf(netip.MustParsePrefix("192.0.2.10/24"))}); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(under); err != nil {
		t.Fatal(err)
	}
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: under.Attrs().Index, Gw: net.ParseIP("192.0.2.1")}); err != nil {
		t.Fatal(err)
	}

	local, peer := configs(t, mustKey(t))
	plan, skipped, err := FromNetworkConfigs(local, []ferryv1alpha1.NetworkConfig{peer}, time.Now())
	if err != nil || len(skipped) > 0 {
		t.Fatalf("plan: %v %v", err, skipped)
	}
	dp := &DataPlane{NS: ns, Links: Links{Prefix: prefix}, ListenPort: DefaultListenPort, VXLANPort: DefaultVXLANPort,
		VNI: DefaultVNI, ForceUserspace: true, Log: logr.Discard()}
	applied, err := dp.Apply(plan, mustKey(t))
	if err != nil {
		_ = dp.Close()
		t.Fatalf("gateway data plane: %v", err)
	}
	if _, err := dp.Ping(netip.MustParseAddr("127.0.0.1"), time.Second); err != nil {
		t.Errorf("gateway's round-trip probe: %v", err)
	}
	if dev, err := dp.Device(); err != nil || dev == nil || len(dev.Peers) != 1 {
		t.Errorf("gateway's tunnel: %v, %v", dev, err)
	}
	if _, err := dp.Counters(); err != nil {
		t.Errorf("gateway's NAT counters: %v", err)
	}
	if err := dp.Close(); err != nil {
		t.Fatalf("gateway teardown: %v", err)
	}

	node := &NodePlane{NS: ns, Links: Links{Prefix: prefix + "n"}, VXLANPort: DefaultVXLANPort, VNI: DefaultVNI}
	if err := node.Apply(netip.MustParseAddr("192.0.2.20"), plan.Ranges(), applied.MTU); err != nil {
		_ = node.Close()
		t.Fatalf("route agent: %v", err)
	}
	if err := node.Close(); err != nil {
		t.Fatalf("route agent teardown: %v", err)
	}
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if name := l.Attrs().Name; strings.HasPrefix(name, prefix) && name != under.Name && name != under.PeerName {
			t.Errorf("link %s left behind", name)
		}
	}
	if !t.Failed() {
		fmt.Println("NETADMIN-OK")
	}
}

// checkCapabilities fails unless this process has NET_ADMIN and NET_RAW
// and lacks SYS_ADMIN, entering its own namespace fails for want of it
// (the trap the gateway fell into), and /proc/sys is read-only.
func checkCapabilities(t *testing.T) {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var eff uint64
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			if eff, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64); err != nil {
				t.Fatal(err)
			}
		}
	}
	if eff&(1<<unix.CAP_SYS_ADMIN) != 0 || eff&(1<<unix.CAP_NET_ADMIN) == 0 || eff&(1<<unix.CAP_NET_RAW) == 0 {
		t.Fatalf("effective capabilities %#x: want NET_ADMIN and NET_RAW without SYS_ADMIN", eff)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	own, err := vnetns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if err := vnetns.Set(own); !errors.Is(err, unix.EPERM) {
		t.Fatalf("setns into its own namespace without SYS_ADMIN: %v, want EPERM", err)
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0); !errors.Is(err, unix.EROFS) {
		t.Fatalf("write to /proc/sys: %v, want EROFS (read-only, as in a container)", err)
	}
}
