package tunnel

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/ipc"
	"golang.zx2c4.com/wireguard/tun"

	"github.com/ferry-io/ferry/fabric/netns"
)

const helperEnv = "FERRY_TUNNEL_HELPER" // mode:name

// TestHelperProcess is not a test: startHelper runs it in a process of its
// own, as a gateway with a WireGuard device open until its standard input
// closes. Modes:
//
//   - ferry: this package's userspace device, in the namespace passed as
//     file descriptor 3, from a process in the test's own namespace (as
//     the gateway runs);
//   - bare: wireguard-go as its daemon runs in the foreground, in a
//     process wholly in the gateway's namespace.
func TestHelperProcess(t *testing.T) {
	mode, name, ok := strings.Cut(os.Getenv(helperEnv), ":")
	if !ok {
		t.Skip("only run by startHelper")
	}
	switch mode {
	case "ferry":
		ns, err := netns.Open("/proc/self/fd/3")
		if err != nil {
			t.Fatal(err)
		}
		d, err := Open(ns, Options{Name: name, MTU: 1500 - Overhead, ForceUserspace: true})
		ns.Close()
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
	case "bare":
		tdev, err := tun.CreateTUN(name, 1500-Overhead)
		if err != nil {
			t.Fatal(err)
		}
		file, err := ipc.UAPIOpen(name)
		if err != nil {
			t.Fatal(err)
		}
		dev := device.NewDevice(tdev, conn.NewDefaultBind(), device.NewLogger(device.LogLevelError, name+": "))
		defer dev.Close()
		uapi, err := ipc.UAPIListen(name, file)
		if err != nil {
			t.Fatal(err)
		}
		defer uapi.Close()
		go func() {
			for {
				c, err := uapi.Accept()
				if err != nil {
					return
				}
				go dev.IpcHandle(c)
			}
		}()
	default:
		t.Fatalf("mode %q", mode)
	}
	fmt.Println("READY")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// helper is a running TestHelperProcess.
type helper struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// kill ends the helper as a crash would, and waits for it to exit.
func (h *helper) kill() {
	_ = h.cmd.Process.Signal(syscall.SIGKILL)
	<-h.exited
}

// startHelper starts TestHelperProcess with a device named name in ns and
// returns once the device is open; the test's end stops it.
func startHelper(t testing.TB, mode string, ns *netns.Namespace, name string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode+":"+name)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	switch mode {
	case "ferry":
		fd, derr := unix.Dup(ns.Fd())
		if derr != nil {
			t.Fatal(derr)
		}
		f := os.NewFile(uintptr(fd), "netns")
		defer f.Close()
		cmd.ExtraFiles = []*os.File{f}
		err = cmd.Start()
	default: // bare
		// A child forked from a thread in the namespace is wholly in it.
		err = ns.Do(cmd.Start)
	}
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = os.Remove(sockPath(name))
	})

	ready := make(chan bool, 1)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if s.Text() == "READY" {
				ready <- true
				break
			}
			fmt.Fprintf(os.Stderr, "helper %s: %s\n", name, s.Text())
		}
		close(ready)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("helper %s ended without opening its device", name)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("helper %s did not open its device", name)
	}
	return &helper{cmd: cmd, exited: exited}
}
