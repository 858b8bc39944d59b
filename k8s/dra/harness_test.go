package dra

import (
	"os"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/daemontest"
	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/internal/testtmp"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement/inventory"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" { // a driver process of TestKilledDriverProcess
		os.Exit(driverChild())
	}
	os.Exit(testtmp.Main(m))
}

const (
	GiB      = units.GiB
	deadline = 10 * time.Second
)

// startDaemon runs a real wsched daemon in-process over the simulated
// 8×RTX 4090 server of testdata/sim-8x4090.toml.
func startDaemon(t *testing.T) (*client.Client, *inventory.Sim) {
	t.Helper()
	return daemontest.RunSim(t, "../../testdata/sim-8x4090.toml", testshared.Logger(t).With("c", "daemon"))
}

// waitFor polls cond until it holds, failing the test after deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testshared.WaitFor(t, deadline, what, cond)
}
