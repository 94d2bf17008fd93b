package testbed

import (
	"context"
	"net"
	"testing"
	"time"
)

func TestDialsFromHost(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:443":      true,
		"127.1.2.3:8443":     true,
		"[::1]:10250":        true,
		"localhost:9443":     true,
		"10.96.0.1:443":      false,
		"172.31.250.3:10250": false,
		"10.244.0.7:8080":    false,
		"[fd00::1]:443":      false,
		"no-port":            false,
	} {
		if got := dialsFromHost(addr); got != want {
			t.Errorf("dialsFromHost(%q) = %t, want %t", addr, got, want)
		}
	}
}

// A webhook or a virtual kubelet serving on the host's 127.0.0.1 is
// reached by the API server's egress from the host, not from a node's
// namespace (where 127.0.0.1 is the node's own loopback): the cluster here
// has neither a node nor an underlay to dial from.
func TestEgressDialsLoopbackFromTheHost(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			_, _ = c.Write([]byte("host"))
			_ = c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := &Cluster{}
	conn, err := c.dialInCluster(ctx, l.Addr().String())
	if err != nil {
		t.Fatalf("dial %s: %v", l.Addr(), err)
	}
	defer conn.Close()
	buf := make([]byte, 4)
	if _, err := conn.Read(buf); err != nil || string(buf) != "host" {
		t.Fatalf("read from %s: %q, %v", l.Addr(), buf, err)
	}
}
