// Command wsched is the GPU-memory placement daemon for speech-to-text
// services and its command-line client: one binary, cobra subcommands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], streams{in: os.Stdin, out: os.Stdout, err: os.Stderr}, os.LookupEnv)
	stop()
	if err != nil {
		os.Exit(report(os.Stderr, err))
	}
}

// streams are the standard streams a command reads and writes.
type streams struct {
	in  io.Reader
	out io.Writer
	err io.Writer
}

// exitError carries a process exit status out of run (wsched run exits with
// its child's status).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// report prints err (unless it only carries an exit status) and returns the
// exit code.
func report(w io.Writer, err error) int {
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintln(w, "wsched:", err)
	return 1
}

// run executes the command line args; it is main without the process exit,
// so tests can call it.
func run(ctx context.Context, args []string, s streams, lookupEnv func(string) (string, bool)) error {
	root := newRootCmd(&app{streams: s, lookupEnv: lookupEnv})
	root.SetArgs(args)
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	return root.ExecuteContext(ctx)
}
