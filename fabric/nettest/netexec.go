package nettest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// netexecPort and netexecUDPPort are where the run's agnhost netexec pods
// serve HTTP and UDP.
const (
	netexecPort    = 8080
	netexecUDPPort = 8081
)

// prober is an agnhost netexec pod making the requests of the checks,
// reached through a port-forward (for an offloaded pod, through its virtual
// kubelet and the provider's API server: not through the fabric).
type prober struct {
	name string
	base string
	stop func()
}

// openClient port-forwards a local port to the pod's netexec port.
func openClient(ctx context.Context, cfg *rest.Config, ns, pod, name string) (*prober, error) {
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("port-forward to %s/%s: %w", ns, pod, err)
	}
	u, err := url.Parse(fmt.Sprintf("%s/api/v1/namespaces/%s/pods/%s/portforward", cfg.Host, ns, pod))
	if err != nil {
		return nil, fmt.Errorf("port-forward to %s/%s: %w", ns, pod, err)
	}
	if cfg.APIPath != "" && cfg.APIPath != "/api" {
		return nil, fmt.Errorf("port-forward to %s/%s: API path %q not supported", ns, pod, cfg.APIPath)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	stop, ready := make(chan struct{}), make(chan struct{})
	var out bytes.Buffer
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", netexecPort)}, stop, ready, io.Discard, &out)
	if err != nil {
		return nil, fmt.Errorf("port-forward to %s/%s: %w", ns, pod, err)
	}
	errc := make(chan error, 1)
	go func() { errc <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errc:
		return nil, fmt.Errorf("port-forward to %s/%s: %v %s", ns, pod, err, out.String())
	case <-ctx.Done():
		close(stop)
		return nil, fmt.Errorf("port-forward to %s/%s: %w", ns, pod, ctx.Err())
	}
	ports, err := fw.GetPorts()
	if err != nil {
		close(stop)
		return nil, fmt.Errorf("port-forward to %s/%s: %w", ns, pod, err)
	}
	closed := false
	return &prober{name: name, base: fmt.Sprintf("http://127.0.0.1:%d", ports[0].Local), stop: func() {
		if !closed {
			closed = true
			close(stop)
		}
	}}, nil
}

// dialAnswer is netexec's /dial answer: each try's response body, and each
// failed try's error.
type dialAnswer struct {
	Responses []string `json:"responses"`
	Errors    []string `json:"errors"`
}

// dial has the client pod make tries requests one after the other, each
// over a new connection (agnhost gives each try 5 s): GET http://host:port/request for "http", the
// datagram request for "udp". It returns the pod's answer and how long the
// whole round took from here; err is set when the request could not be
// made through the pod at all (a probe failure, not a path failure).
func (c *prober) dial(ctx context.Context, protocol, host string, port int, request string, tries int) (dialAnswer, time.Duration, error) {
	q := url.Values{"host": {host}, "port": {strconv.Itoa(port)}, "protocol": {protocol}, "request": {request}, "tries": {strconv.Itoa(tries)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/dial?"+q.Encode(), nil)
	if err != nil {
		return dialAnswer{}, 0, err
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		// Without the URL, which carries the request.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return dialAnswer{}, 0, fmt.Errorf("%s: /dial through the port-forward: %w", c.name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	took := time.Since(start)
	if err != nil {
		return dialAnswer{}, 0, fmt.Errorf("%s: /dial answer: %w", c.name, err)
	}
	a, err := ParseDialAnswer(resp.StatusCode, body)
	if err != nil {
		return dialAnswer{}, 0, fmt.Errorf("%s: %w", c.name, err)
	}
	return a, took, nil
}

// ParseDialAnswer reads agnhost netexec's /dial answer: 200 when the try
// succeeded, 417 when it failed, each with a JSON body of responses and
// errors; anything else (400: bad parameters, a DNS failure of a UDP
// target) is an error carrying the body.
func ParseDialAnswer(status int, body []byte) (dialAnswer, error) {
	var a dialAnswer
	switch status {
	case http.StatusOK, http.StatusExpectationFailed:
	case http.StatusBadRequest:
		// agnhost refuses a UDP target it cannot resolve with 400 and the
		// reason as text: a failure of the path's DNS, not of the probe.
		msg := string(bytes.TrimSpace(body))
		if len(msg) > 300 {
			msg = msg[:300]
		}
		return dialAnswer{Errors: []string{msg}}, nil
	default:
		return a, fmt.Errorf("/dial: HTTP %d: %.200s", status, body)
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return a, fmt.Errorf("/dial: HTTP %d, answer %.200q: %w", status, body, err)
	}
	if len(a.Responses)+len(a.Errors) == 0 {
		return a, fmt.Errorf("/dial: HTTP %d, neither a response nor an error in %.200q", status, body)
	}
	return a, nil
}
