package kubeletapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	vkapi "github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"
	utilexec "k8s.io/utils/exec"
)

// logs streams a container's log from the provider.
func (s *Server) logs(ctx context.Context, namespace, name, container string, o vkapi.ContainerLogOpts) (io.ReadCloser, error) {
	rp, err := s.resolver.resolve(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	opts := &corev1.PodLogOptions{Container: container, Follow: o.Follow, Previous: o.Previous, Timestamps: o.Timestamps}
	if o.Tail > 0 {
		opts.TailLines = new(int64(o.Tail))
	}
	if o.LimitBytes > 0 {
		opts.LimitBytes = new(int64(o.LimitBytes))
	}
	if o.SinceSeconds > 0 {
		opts.SinceSeconds = new(int64(o.SinceSeconds))
	} else if !o.SinceTime.IsZero() {
		opts.SinceTime = &metav1.Time{Time: o.SinceTime}
	}
	rc, err := s.remote.CoreV1().Pods(rp.Namespace).GetLogs(rp.Name, opts).Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("logs of %s/%s container %s on the provider: %w", rp.Namespace, rp.Name, container, err)
	}
	return &untilDone{ReadCloser: rc, ctx: ctx}, nil
}

// untilDone ends a log stream quietly when its client hangs up (kubectl
// logs -f interrupted): that is the end of the stream, not an error.
type untilDone struct {
	io.ReadCloser
	ctx context.Context
}

func (u *untilDone) Read(p []byte) (int, error) {
	n, err := u.ReadCloser.Read(p)
	if err != nil && u.ctx.Err() != nil {
		return n, io.EOF
	}
	return n, err
}

// exec runs cmd in a container of the provider's pod, wiring the streams
// the consumer's API server opened.
func (s *Server) exec(ctx context.Context, namespace, name, container string, cmd []string, io vkapi.AttachIO) error {
	rp, err := s.resolver.resolve(ctx, namespace, name)
	if err != nil {
		return err
	}
	opts := &corev1.PodExecOptions{Container: container, Command: cmd, Stdin: io.Stdin() != nil,
		Stdout: io.Stdout() != nil, Stderr: io.Stderr() != nil, TTY: io.TTY()}
	req := s.remote.CoreV1().RESTClient().Post().Resource("pods").Namespace(rp.Namespace).Name(rp.Name).
		SubResource("exec").VersionedParams(opts, scheme.ParameterCodec)
	return s.stream(ctx, req.URL(), io, "exec")
}

// attach attaches to a running container of the provider's pod.
func (s *Server) attach(ctx context.Context, namespace, name, container string, io vkapi.AttachIO) error {
	rp, err := s.resolver.resolve(ctx, namespace, name)
	if err != nil {
		return err
	}
	opts := &corev1.PodAttachOptions{Container: container, Stdin: io.Stdin() != nil,
		Stdout: io.Stdout() != nil, Stderr: io.Stderr() != nil, TTY: io.TTY()}
	req := s.remote.CoreV1().RESTClient().Post().Resource("pods").Namespace(rp.Namespace).Name(rp.Name).
		SubResource("attach").VersionedParams(opts, scheme.ParameterCodec)
	return s.stream(ctx, req.URL(), io, "attach")
}

// stream runs a remote command (exec or attach) at u: WebSockets first, as
// kubectl does, SPDY when the provider does not speak them.
func (s *Server) stream(ctx context.Context, u *url.URL, aio vkapi.AttachIO, what string) error {
	ws, err := remotecommand.NewWebSocketExecutor(s.remoteCfg, "GET", u.String())
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	sp, err := remotecommand.NewSPDYExecutor(s.remoteCfg, "POST", u)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, sp, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	opts := remotecommand.StreamOptions{Tty: aio.TTY(), Stdin: aio.Stdin()}
	if w := aio.Stdout(); w != nil {
		opts.Stdout = w
	}
	if w := aio.Stderr(); w != nil {
		opts.Stderr = w
	}
	if aio.TTY() {
		opts.TerminalSizeQueue = &sizeQueue{ctx: ctx, ch: aio.Resize()}
	}
	if err := exec.StreamWithContext(ctx, opts); err != nil {
		// A command's exit code goes back as it is, so kubectl exits with it:
		// the kubelet API's server recognizes the type, not a wrapped one.
		var exitErr utilexec.CodeExitError
		if errors.As(err, &exitErr) {
			return exitErr
		}
		return fmt.Errorf("%s on the provider: %w", what, err)
	}
	return nil
}

// sizeQueue hands the terminal resizes the user's kubectl sends on to the
// provider.
type sizeQueue struct {
	ctx context.Context
	ch  <-chan vkapi.TermSize
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	select {
	case <-q.ctx.Done():
		return nil
	case sz, ok := <-q.ch:
		if !ok {
			return nil
		}
		return &remotecommand.TerminalSize{Width: sz.Width, Height: sz.Height}
	}
}

// portForward carries one forwarded connection to port of the provider's
// pod: a port-forward session of its own on the provider's API server, with
// one error and one data stream, as kubectl port-forward opens them.
func (s *Server) portForward(ctx context.Context, namespace, name string, port int32, conn io.ReadWriteCloser) error {
	defer conn.Close()
	rp, err := s.resolver.resolve(ctx, namespace, name)
	if err != nil {
		return err
	}
	transport, upgrader, err := spdy.RoundTripperFor(s.remoteCfg)
	if err != nil {
		return fmt.Errorf("port-forward: %w", err)
	}
	u := s.remote.CoreV1().RESTClient().Post().Resource("pods").Namespace(rp.Namespace).Name(rp.Name).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	session, _, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		return fmt.Errorf("port-forward to %s/%s on the provider: %w", rp.Namespace, rp.Name, err)
	}
	defer session.Close()

	headers := http.Header{}
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	headers.Set(corev1.PortHeader, strconv.Itoa(int(port)))
	headers.Set(corev1.PortForwardRequestIDHeader, "0")
	errorStream, err := session.CreateStream(headers)
	if err != nil {
		return fmt.Errorf("port-forward: create error stream: %w", err)
	}
	_ = errorStream.Close() // nothing is sent on it
	remoteErr := make(chan error, 1)
	go func() {
		msg, err := io.ReadAll(errorStream)
		switch {
		case err != nil:
			remoteErr <- fmt.Errorf("port-forward: read error stream: %w", err)
		case len(msg) > 0:
			remoteErr <- fmt.Errorf("port-forward to port %d of %s/%s on the provider: %s", port, rp.Namespace, rp.Name, msg)
		default:
			remoteErr <- nil
		}
	}()
	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	dataStream, err := session.CreateStream(headers)
	if err != nil {
		return fmt.Errorf("port-forward: create data stream: %w", err)
	}

	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		// Consumer to provider; closing the data stream's write side tells
		// the provider the client is done.
		_, _ = io.Copy(dataStream, conn)
		_ = dataStream.Close()
	})
	go func() {
		_, _ = io.Copy(conn, dataStream)
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	case <-session.CloseChan():
	}
	_ = conn.Close()
	dataStream.Reset()
	wg.Wait()
	select {
	case err := <-remoteErr:
		return err
	case <-time.After(time.Second):
		return nil
	}
}
