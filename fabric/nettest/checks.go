package nettest

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// largeSize is the payload of PathLarge, each way.
const largeSize = 64 << 10

// spec is a check to run: from the pod from, a request to host.
type spec struct {
	Check
	from     string // the client pod
	protocol string
	host     string
	port     int
	// peer is the peer of a cross-cluster check.
	peer *PeerState
	// prepare, when set, says why the check cannot be made (a target
	// address that cannot be computed); Diagnose explains it.
	prepare string
	// request and accept: what to send, and whether an answer is right.
	request string
	accept  func(string) error
	// small, for PathMTU, is a small datagram sent first.
	small string
	// smallCheck, for PathLarge, is the index of the check with small
	// requests on the same path and direction.
	smallCheck int
}

// checks builds the run's checks and runs them in order, each with its
// own timeout.
func (r *run) checks(ctx context.Context) {
	specs := r.plan()
	for i := range specs {
		if ctx.Err() != nil {
			return
		}
		s := &specs[i]
		fmt.Fprintf(r.opts.Log, "Checking %s %s → %s (%s).\n", s.Path, s.From, s.To, s.Target)
		r.report.Checks = append(r.report.Checks, r.runCheck(ctx, s, r.report.Checks))
	}
}

// plan lists the checks: within this cluster first (a baseline), then per
// peer each path both ways.
func (r *run) plan() []spec {
	home, home2 := r.pods[homeName], r.pods[home2Name]
	here := r.report.Cluster
	hostname := func(want string) func(string) error {
		return func(got string) error {
			if got != want {
				return fmt.Errorf("answered by %q, not %q", got, want)
			}
			return nil
		}
	}
	anyAnswer := nonEmpty
	// The consumer's kubernetes Service port, which offloaded pods reach
	// kubernetes.default at too.
	apiPort := 443
	if a := r.local.Spec.APIServer; a != nil {
		apiPort = int(a.Port)
	}
	api := fmt.Sprintf("kubernetes.default:%d", apiPort)
	specs := []spec{
		{Check: Check{Path: PathPod, From: here, To: here, Target: "pod " + home2.Status.PodIP}, from: homeName, protocol: "http", host: home2.Status.PodIP, port: netexecPort, request: "hostname", accept: hostname(home2Name)},
		{Check: Check{Path: PathService, From: here, To: here, Target: "service " + home2Name}, from: homeName, protocol: "http", host: home2Name, port: 80, request: "hostname", accept: hostname(home2Name)},
		{Check: Check{Path: PathAPIServer, From: here, To: here, Target: api}, from: homeName, protocol: "http", host: "kubernetes.default", port: apiPort, request: "livez", accept: anyAnswer},
	}
	msg := strings.Repeat("0123456789abcdef", largeSize/16)
	for i, p := range r.peers {
		away := r.pods[awayName(i)]
		there := p.ClusterID
		// Where the peer sees this cluster's home pod.
		homeThere, err := Translate(home.Status.PodIP, r.local.Spec.PodCIDR, p.PodCIDRAtPeer)
		var prepare string
		if err != nil {
			prepare = fmt.Sprintf("where %s sees pod %s of this cluster (pod CIDR %s → %q): %v", there, home.Status.PodIP, r.local.Spec.PodCIDR, p.PodCIDRAtPeer, err)
			homeThere = "?"
		}
		out := func(path Path, target string) Check {
			return Check{Path: path, From: here, To: there, Target: target, Cross: true, Peer: there}
		}
		in := func(path Path, target string) Check {
			return Check{Path: path, From: there, To: here, Target: target, Cross: true, Peer: there}
		}
		base := len(specs)
		specs = append(specs,
			spec{Check: out(PathPod, "pod "+away.Status.PodIP), from: homeName, protocol: "http", host: away.Status.PodIP, port: netexecPort, request: "hostname", accept: hostname(awayName(i)), peer: p},
			spec{Check: in(PathPod, "pod "+homeThere), from: awayName(i), protocol: "http", host: homeThere, port: netexecPort, request: "hostname", accept: hostname(homeName), peer: p, prepare: prepare},
			spec{Check: out(PathService, "service "+awayName(i)), from: homeName, protocol: "http", host: awayName(i), port: 80, request: "hostname", accept: hostname(awayName(i)), peer: p},
			spec{Check: in(PathService, "service "+homeName), from: awayName(i), protocol: "http", host: homeName, port: 80, request: "hostname", accept: hostname(homeName), peer: p},
			spec{Check: in(PathAPIServer, api), from: awayName(i), protocol: "http", host: "kubernetes.default", port: apiPort, request: "livez", accept: anyAnswer, peer: p},
		)
		if p.MTU > 0 {
			size := int(p.MTU) - 28 // IPv4 and UDP headers
			payload := "echo " + msg[:size-len("echo ")]
			// agnhost reads at most 1024 bytes of a datagram and echoes what
			// follows "echo ": the answer is the start of the payload.
			echoed := func(got string) error {
				if got == "" || !strings.HasPrefix(payload[len("echo "):], got) {
					return fmt.Errorf("answer of %d bytes is not the start of the %d-byte datagram", len(got), size)
				}
				return nil
			}
			target := fmt.Sprintf("%d-byte datagram", int(p.MTU))
			specs = append(specs,
				spec{Check: out(PathMTU, target+" to "+away.Status.PodIP), from: homeName, protocol: "udp", host: away.Status.PodIP, port: netexecUDPPort, small: "hostname", request: payload, accept: echoed, peer: p},
				spec{Check: in(PathMTU, target+" to "+homeThere), from: awayName(i), protocol: "udp", host: homeThere, port: netexecUDPPort, small: "hostname", request: payload, accept: echoed, peer: p, prepare: prepare},
			)
		}
		echo := func(got string) error {
			if got != msg {
				return fmt.Errorf("the %d-byte answer differs from the %d-byte request", len(got), len(msg))
			}
			return nil
		}
		specs = append(specs,
			spec{Check: out(PathLarge, "pod "+away.Status.PodIP), from: homeName, protocol: "http", host: away.Status.PodIP, port: netexecPort, request: "echo?msg=" + msg, accept: echo, peer: p, smallCheck: base},
			spec{Check: in(PathLarge, "pod "+homeThere), from: awayName(i), protocol: "http", host: homeThere, port: netexecPort, request: "echo?msg=" + msg, accept: echo, peer: p, prepare: prepare, smallCheck: base + 1},
		)
	}
	return specs
}

// runCheck runs one check until it passes or its timeout ends; a passed
// check is timed over three requests. done are the checks run before.
func (r *run) runCheck(ctx context.Context, s *spec, done []Check) Check {
	c := s.Check
	cctx, cancel := context.WithTimeout(ctx, r.opts.CheckTimeout)
	defer cancel()
	o := Outcome{Path: s.Path, Cross: s.Cross, Cluster: s.From}
	if s.Path == PathLarge && s.smallCheck < len(done) {
		o.SmallPassed = done[s.smallCheck].Passed
	}
	cl := r.clients[s.from]
	var lastErr string
	attempt := func(request string, tries int, accept func(string) error) (time.Duration, bool) {
		a, took, err := cl.dial(cctx, s.protocol, s.host, s.port, request, tries)
		switch {
		case err != nil && cctx.Err() != nil:
			lastErr = fmt.Sprintf("no answer within the check's %s", r.opts.CheckTimeout)
			return 0, false
		case err != nil:
			o.Probe = shorten(err.Error())
			lastErr = o.Probe
			return 0, false
		case len(a.Errors) > 0:
			lastErr = shorten(a.Errors[len(a.Errors)-1])
			return 0, false
		case len(a.Responses) != tries:
			lastErr = fmt.Sprintf("%d answers to %d tries", len(a.Responses), tries)
			return 0, false
		}
		for _, resp := range a.Responses {
			if err := accept(resp); err != nil {
				lastErr = err.Error()
				return 0, false
			}
		}
		o.Probe = ""
		return took, true
	}
	var took time.Duration
	passed := false
	if s.prepare == "" {
		for cctx.Err() == nil {
			ok := true
			if s.small != "" {
				_, ok = attempt(s.small, 1, nonEmpty)
				if ok {
					o.SmallPassed = true
				} else {
					lastErr = "small datagrams fail too: " + lastErr
				}
			}
			if ok {
				if took, passed = attempt(s.request, 1, s.accept); passed {
					break
				}
			}
			select {
			case <-cctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	} else {
		lastErr = s.prepare
	}
	if !passed {
		o.Err = lastErr
		if ctx.Err() != nil {
			o.Probe = "interrupted: " + ctx.Err().Error()
		}
		c.Cause, c.Detail = Diagnose(o, s.peer, time.Now())
		return c
	}
	c.Passed = true
	// The latency: /dials of one try and of latencyTries, each the least of
	// three; the difference is what latencyTries-1 requests took in the
	// client pod, without the port-forward's share (whose jitter, spread
	// over them, is what remains).
	one, many := took, time.Duration(0)
	for range 2 {
		if t, ok := attempt(s.request, 1, s.accept); ok {
			one = min(one, t)
		}
	}
	for range 3 {
		if t, ok := attempt(s.request, latencyTries, s.accept); ok && (many == 0 || t < many) {
			many = t
		}
	}
	if many > 0 {
		d := max(many-one, 0) / (latencyTries - 1)
		c.LatencyMicros = d.Microseconds()
		c.Latency = d.Round(10 * time.Microsecond).String()
		if d < latencyFloor {
			c.Latency = "<" + latencyFloor.String()
		}
	}
	return c
}

// latencyTries is how many requests of a passed check are timed in one
// /dial; latencyFloor the least latency told apart from the jitter.
const (
	latencyTries = 21
	latencyFloor = 50 * time.Microsecond
)

// nonEmpty accepts any answer but none.
func nonEmpty(got string) error {
	if got == "" {
		return fmt.Errorf("empty answer")
	}
	return nil
}

// shorten keeps the start and the end of a long error (agnhost's quote the
// request's URL, 64 KiB of it for PathLarge).
func shorten(s string) string {
	const head, tail = 160, 80
	if len(s) <= head+tail+len(" … ") {
		return s
	}
	return strings.ToValidUTF8(s[:head], "") + " … " + strings.ToValidUTF8(s[len(s)-tail:], "")
}
