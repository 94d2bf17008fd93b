// Command probe is the program of the image `make bench-real` measures the
// network with on real nodes (realbed.ProbeImage): a server, and clients
// that time sequential HTTP requests and a TCP stream from inside a pod
// and print one line, "PROBE <json>", for the benchmark to read from the
// pod's log.
//
//	probe serve [-http :8080] [-tcp :5201]
//	probe http -url http://10.96.0.12/ [-n 1000] [-warmup 20] [-keepalive]
//	probe tcp -addr 10.244.0.7:5201 [-duration 5s]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe serve|http|tcp [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	var err error
	switch os.Args[1] {
	case "serve":
		httpAddr := fs.String("http", ":8080", "address of the HTTP server, which answers every request with 200 and \"ok\"")
		tcpAddr := fs.String("tcp", ":5201", "address of the TCP sink, which reads a connection to its end and answers with the number of bytes read")
		_ = fs.Parse(os.Args[2:])
		err = serve(*httpAddr, *tcpAddr)
	case "http":
		url := fs.String("url", "", "URL to GET")
		n := fs.Int("n", 1000, "requests timed, one after the other")
		warmup := fs.Int("warmup", 20, "requests sent first, not timed")
		keepalive := fs.Bool("keepalive", false, "reuse one connection (else each request opens its own, so a Service spreads them over its endpoints)")
		timeout := fs.Duration("timeout", 2*time.Second, "bound of each request")
		_ = fs.Parse(os.Args[2:])
		err = report(timeHTTP(*url, *n, *warmup, *keepalive, *timeout))
	case "tcp":
		addr := fs.String("addr", "", "address of a probe serve's TCP sink")
		duration := fs.Duration("duration", 5*time.Second, "how long to send")
		_ = fs.Parse(os.Args[2:])
		err = report(stream(*addr, *duration))
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}

func report(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Printf("PROBE %s\n", b)
	return err
}

func serve(httpAddr, tcpAddr string) error {
	l, err := net.Listen("tcp", tcpAddr)
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go sink(c)
		}
	}()
	return http.ListenAndServe(httpAddr, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
}

func sink(c net.Conn) {
	defer func() { _ = c.Close() }()
	n, _ := io.Copy(io.Discard, c)
	_, _ = fmt.Fprintf(c, "%d\n", n)
}

// HTTPResult is what `probe http` prints.
type HTTPResult struct {
	// SamplesMicros are the timed requests' durations, request written to
	// body read, in microseconds, in order.
	SamplesMicros []int64 `json:"samples_us"`
	// Errors counts failed requests; the run stops after 5 in a row.
	Errors     int    `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
}

func timeHTTP(url string, n, warmup int, keepalive bool, timeout time.Duration) HTTPResult {
	tr := &http.Transport{DisableKeepAlives: !keepalive, MaxIdleConnsPerHost: 1}
	c := &http.Client{Transport: tr, Timeout: timeout}
	var r HTTPResult
	inARow := 0
	for i := 0; i < warmup+n && inARow < 5; i++ {
		start := time.Now()
		err := get(c, url)
		d := time.Since(start)
		if err != nil {
			r.Errors++
			inARow++
			if r.FirstError == "" {
				r.FirstError = err.Error()
			}
			continue
		}
		inARow = 0
		if i >= warmup {
			r.SamplesMicros = append(r.SamplesMicros, d.Microseconds())
		}
	}
	return r
}

func get(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		return fmt.Errorf("status %d, body %q", resp.StatusCode, body)
	}
	return nil
}

// TCPResult is what `probe tcp` prints.
type TCPResult struct {
	// Bytes the sink read, and Seconds from the connection's start until
	// the sink said so.
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
}

func stream(addr string, duration time.Duration) TCPResult {
	n, d, err := streamTo(addr, duration)
	r := TCPResult{Bytes: n, Seconds: d.Seconds()}
	if err != nil {
		r.Error = err.Error()
	}
	return r
}

func streamTo(addr string, duration time.Duration) (int64, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, 0, err
	}
	c := conn.(*net.TCPConn)
	defer func() { _ = c.Close() }()
	buf := make([]byte, 128<<10)
	end := start.Add(duration)
	_ = c.SetWriteDeadline(end.Add(10 * time.Second))
	for time.Now().Before(end) {
		if _, err := c.Write(buf); err != nil {
			return 0, 0, fmt.Errorf("write: %w", err)
		}
	}
	if err := c.CloseWrite(); err != nil {
		return 0, 0, fmt.Errorf("close write: %w", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, 0, fmt.Errorf("read the sink's count: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("the sink's count %q: %w", line, err)
	}
	return n, time.Since(start), nil
}
