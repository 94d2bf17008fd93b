package mover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/ferry-io/ferry/version"
)

// Name is the program's name.
const Name = "ferry-volume-mover"

const usage = `usage:
  ferry-volume-mover serve --dir=DIR [--listen=:7070]
  ferry-volume-mover fetch --dir=DIR --from=HOST:PORT [--termination-log=/dev/termination-log]
  ferry-volume-mover relay --to=HOST:PORT [--listen=:7070]
  ferry-volume-mover --version
serve and fetch read a shared secret from $FERRY_MOVER_TOKEN when it is set.
`

// Main runs the program with args (without the program's name) and
// returns its exit status: 0 on success (serve and relay: when ctx ends),
// 1 on failure, 2 on a usage error. Logs go to stderr, progress lines to
// stdout.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, args := args[0], args[1:]
	fs := pflag.NewFlagSet(Name+" "+cmd, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var dir, listen, from, to, termLog string
	var connectTimeout time.Duration
	switch cmd {
	case "serve":
		fs.StringVar(&dir, "dir", "", "directory whose tree is served, read-only (required)")
		fs.StringVar(&listen, "listen", ":7070", "TCP address to serve on")
	case "fetch":
		fs.StringVar(&dir, "dir", "", "directory emptied, then filled with the served tree (required)")
		fs.StringVar(&from, "from", "", "HOST:PORT of the serve (or relay) to copy from (required)")
		fs.StringVar(&termLog, "termination-log", "/dev/termination-log", "file written with the result (JSON) or the reason of a failure (one line); empty: none")
		fs.DurationVar(&connectTimeout, "connect-timeout", 2*time.Minute, "how long to keep trying to reach --from before the copy starts")
	case "relay":
		fs.StringVar(&listen, "listen", ":7070", "TCP address to accept connections on")
		fs.StringVar(&to, "to", "", "HOST:PORT every connection is relayed to (required)")
	case "--version", "version":
		fmt.Fprintln(stdout, Name, version.Get().String())
		return 0
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "unknown command %q\n%s", cmd, usage)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "%s takes no arguments, got %q\n", cmd, fs.Args())
		return 2
	}
	for _, req := range []struct{ flag, val string }{{"dir", dir}, {"from", from}, {"to", to}} {
		if fs.Lookup(req.flag) != nil && req.val == "" {
			fmt.Fprintf(stderr, "%s: --%s is required\n", cmd, req.flag)
			if cmd == "fetch" {
				_ = writeTermination(termLog, fmt.Sprintf("--%s is required", req.flag))
			}
			return 2
		}
	}
	log = log.With("command", cmd)
	log.Info("starting", "version", version.Get().String())

	switch cmd {
	case "serve", "relay":
		ln, err := Listen(ctx, listen)
		if err != nil {
			log.Error("cannot listen", "err", err)
			return 1
		}
		if cmd == "serve" {
			err = (&Server{Dir: dir, Token: os.Getenv(TokenEnv), Log: log}).Serve(ctx, ln)
		} else {
			err = (&Relay{To: to, Log: log}).Serve(ctx, ln)
		}
		if err != nil {
			log.Error("failed", "err", err)
			return 1
		}
		return 0
	}

	f := &Fetcher{Dir: dir, From: from, Token: os.Getenv(TokenEnv), Progress: stdout, ConnectTimeout: connectTimeout, Log: log}
	res, err := f.Fetch(ctx)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted (%w): %w", context.Cause(ctx), err)
		}
		log.Error("fetch failed", "err", err)
		if werr := writeTermination(termLog, reasonLine(err)); werr != nil {
			log.Error("cannot record the failure", "err", werr)
		}
		return 1
	}
	msg, _ := json.Marshal(res)
	if err := writeTermination(termLog, string(msg)); err != nil {
		// Without its result the copy cannot be trusted by whoever
		// started it: this is a failure too.
		log.Error("cannot record the result", "err", err)
		return 1
	}
	return 0
}
