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
  ferry-volume-mover fetch --dir=DIR --from=HOST:PORT [--termination-log=/dev/termination-log] [--connect-timeout=2m] [--idle-timeout=2m]
  ferry-volume-mover relay --to=HOST:PORT [--listen=:7070]
  ferry-volume-mover --version
serve and fetch read a shared secret from $FERRY_MOVER_TOKEN when it is set.
`

// Commands are the subcommands taking flags, as the usage lists them.
var Commands = []string{"serve", "fetch", "relay"}

// FlagSet is the command line of subcommand cmd (one of Commands), nil for
// any other: exactly the flags Main parses after it.
func FlagSet(cmd string) *pflag.FlagSet {
	var f cliFlags
	return f.flagSet(cmd)
}

// cliFlags are the values of the subcommands' flags.
type cliFlags struct {
	dir, listen, from, to, termLog string
	connectTimeout, idleTimeout    time.Duration
}

func (f *cliFlags) flagSet(cmd string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(Name+" "+cmd, pflag.ContinueOnError)
	switch cmd {
	case "serve":
		fs.StringVar(&f.dir, "dir", "", "directory whose tree is served, read-only (required)")
		fs.StringVar(&f.listen, "listen", fmt.Sprintf(":%d", DefaultPort), "TCP address to serve on")
	case "fetch":
		fs.StringVar(&f.dir, "dir", "", "directory emptied, then filled with the served tree (required)")
		fs.StringVar(&f.from, "from", "", "HOST:PORT of the serve (or relay) to copy from (required)")
		fs.StringVar(&f.termLog, "termination-log", "/dev/termination-log", "file written with the result (JSON) or the reason of a failure (one line); empty: none")
		fs.DurationVar(&f.connectTimeout, "connect-timeout", 2*time.Minute, "how long to keep trying to reach --from before the copy starts")
		fs.DurationVar(&f.idleTimeout, "idle-timeout", 2*time.Minute, "fail when nothing comes from --from for this long once the copy has started")
	case "relay":
		fs.StringVar(&f.listen, "listen", fmt.Sprintf(":%d", DefaultPort), "TCP address to accept connections on")
		fs.StringVar(&f.to, "to", "", "HOST:PORT every connection is relayed to (required)")
	default:
		return nil
	}
	return fs
}

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
	switch cmd {
	case "--version", "version":
		fmt.Fprintln(stdout, Name, version.Get().String())
		return 0
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	var fl cliFlags
	fs := fl.flagSet(cmd)
	if fs == nil {
		fmt.Fprintf(stderr, "unknown command %q\n%s", cmd, usage)
		return 2
	}
	fs.SetOutput(stderr)
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
	for _, req := range []struct{ flag, val string }{{"dir", fl.dir}, {"from", fl.from}, {"to", fl.to}} {
		if fs.Lookup(req.flag) != nil && req.val == "" {
			fmt.Fprintf(stderr, "%s: --%s is required\n", cmd, req.flag)
			if cmd == "fetch" {
				_ = writeTermination(fl.termLog, fmt.Sprintf("--%s is required", req.flag))
			}
			return 2
		}
	}
	log = log.With("command", cmd)
	log.Info("starting", "version", version.Get().String())

	switch cmd {
	case "serve", "relay":
		ln, err := Listen(ctx, fl.listen)
		if err != nil {
			log.Error("cannot listen", "err", err)
			return 1
		}
		if cmd == "serve" {
			err = (&Server{Dir: fl.dir, Token: os.Getenv(TokenEnv), Log: log}).Serve(ctx, ln)
		} else {
			err = (&Relay{To: fl.to, Log: log}).Serve(ctx, ln)
		}
		if err != nil {
			log.Error("failed", "err", err)
			return 1
		}
		return 0
	}

	f := &Fetcher{Dir: fl.dir, From: fl.from, Token: os.Getenv(TokenEnv), Progress: stdout, ConnectTimeout: fl.connectTimeout, IdleTimeout: fl.idleTimeout, Log: log}
	res, err := f.Fetch(ctx)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted (%w): %w", context.Cause(ctx), err)
		}
		log.Error("fetch failed", "err", err)
		if werr := writeTermination(fl.termLog, reasonLine(err)); werr != nil {
			log.Error("cannot record the failure", "err", werr)
		}
		return 1
	}
	msg, _ := json.Marshal(res)
	if err := writeTermination(fl.termLog, string(msg)); err != nil {
		// Without its result the copy cannot be trusted by whoever
		// started it: this is a failure too.
		log.Error("cannot record the result", "err", err)
		return 1
	}
	return 0
}
