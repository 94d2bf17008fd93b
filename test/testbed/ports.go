package testbed

import (
	"fmt"
	"net"
	"sync"
)

var (
	portsMu sync.Mutex
	// handedOut keeps this process from giving the same port twice, even
	// after the listener that found it free is closed.
	handedOut = map[int]bool{}
)

// FreePorts finds n TCP ports on 127.0.0.1 free right now, never one this
// process handed out before. Another process may still take one before our
// server binds it; Start retries then.
func FreePorts(n int) ([]int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	ports := make([]int, 0, n)
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port on 127.0.0.1: %w", err)
		}
		held = append(held, l)
		port := l.Addr().(*net.TCPAddr).Port
		if handedOut[port] {
			continue
		}
		handedOut[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}
