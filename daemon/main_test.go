package daemon

import (
	"os"
	"testing"

	"github.com/wsched/wsched/internal/asuser"
	"github.com/wsched/wsched/internal/testtmp"
)

// fakeRoot holds what the package's tests share (the fake backend, built
// once); TestMain removes it.
var fakeRoot string

func TestMain(m *testing.M) {
	switch asuser.Helper() {
	case "requests":
		os.Exit(requestsHelper(os.Args[1:]))
	case "hold":
		os.Exit(holdHelper(os.Args[1:]))
	case "streams":
		os.Exit(streamsHelper(os.Args[1:]))
	case "get":
		os.Exit(getHelper(os.Args[1:]))
	case "cycles":
		os.Exit(cyclesHelper(os.Args[1:]))
	}
	os.Exit(testtmp.Run(func() int {
		dir, err := os.MkdirTemp("", "wsched-daemon-test-")
		if err != nil {
			return 1
		}
		defer os.RemoveAll(dir)
		fakeRoot = dir
		return m.Run()
	}))
}
