// Command wsched is a PLACEHOLDER on the packaging branch: it exists only so that the packaging work
// has a binary to put into the .deb. The real daemon (issue 4) replaces this file when merged.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	// Links the C library like the real daemon does (go-nvml needs cgo), so that the package built
	// from this placeholder has the same dependencies.
	_ "runtime/cgo"
)

// version is set at build time: go build -ldflags "-X main.version=…".
var version = "dev"

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "wsched:", err)
		os.Exit(1)
	}
}

func run(_ context.Context, args []string) error {
	if len(args) > 0 && (args[0] == "version" || args[0] == "--version") {
		fmt.Println("wsched", version)
		return nil
	}
	return errors.New("placeholder binary from the packaging branch; the daemon lands with issue 4")
}
