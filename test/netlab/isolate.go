package netlab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/ferry-io/ferry/fabric/netns"
)

// envIsolated marks a test binary re-executed in its own network namespace.
const envIsolated = "FERRY_NETLAB_ISOLATED"

// Isolated reports whether this process runs in the private network
// namespace Main made for it.
func Isolated() bool { return os.Getenv(envIsolated) == "1" }

// Main is a TestMain for packages whose tests touch the network: as root, it
// re-executes the test binary in a network namespace of its own (nothing
// but loopback, which it brings up), so that no test can configure the
// host's network or send a packet out of it, and exits with the child's
// status. Without root it runs the tests as they are, and Require skips
// those that need the namespace.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if Isolated() {
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "netlab: bring up loopback in the test's network namespace: %v\n", err)
			return 1
		}
		return m.Run()
	}
	if os.Geteuid() != 0 || fuzzWorker() {
		return m.Run()
	}
	code, err := reexec()
	if err != nil {
		fmt.Fprintf(os.Stderr, "netlab: run the tests in a network namespace of their own: %v\n", err)
		return 1
	}
	return code
}

// fuzzWorker reports whether this process is a worker of go test -fuzz:
// its coordinator runs in the namespace already, and a worker runs only
// fuzz targets, which touch no network.
func fuzzWorker() bool {
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-test.fuzzworker") {
			return true
		}
	}
	return false
}

// reexec runs this binary again, with the same arguments, in a new network
// namespace, forwarding interrupts to it.
func reexec() (int, error) {
	// Pdeathsig belongs to the thread that started the child: keep it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), envIsolated+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	go func() {
		for s := range signals {
			_ = cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return exit.ExitCode(), nil
	}
	return 0, err
}

// Require skips a test that needs its own network namespace when the
// binary does not run in one (not root).
func Require(t testing.TB) {
	t.Helper()
	if !Isolated() {
		t.Skip("needs root: network tests run in a network namespace of their own (netlab.Main)")
	}
}

// Namespace makes a new, unnamed network namespace with its loopback up,
// released when the test ends, for tests that build their own topology.
func Namespace(tb testing.TB, name string) *netns.Namespace {
	tb.Helper()
	ns, err := netns.New(name)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = ns.Close() })
	if err := inNS(ns, func() error {
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		return err
	}); err != nil {
		tb.Fatalf("namespace %s: bring up loopback: %v", name, err)
	}
	return ns
}
