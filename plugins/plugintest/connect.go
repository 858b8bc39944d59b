package plugintest

import (
	"io"
	"os/exec"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/wsched/wsched/plugins"
)

// Connect serves impl in-process and returns the host's view of it over a
// real gRPC connection, as the daemon would see it. The connection closes
// when the test ends.
func Connect(t *testing.T, impl plugins.Backend) plugins.Backend {
	t.Helper()
	client, server := plugin.TestPluginGRPCConn(t, false, plugins.PluginSet(impl))
	t.Cleanup(func() {
		// Stop the server first: client.Close asks the server to stop itself,
		// and go-plugin's GRPCServer.Stop is not safe to call twice at once.
		server.Stop()
		_ = client.Close()
	})
	b, err := plugins.Dispense(client)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Start execs a backend binary through go-plugin's handshake
// (plugins.ClientConfig) and returns it with its PID. go-plugin's log goes
// to logs at level; the process is killed when the test ends.
func Start(t testing.TB, cmd *exec.Cmd, logs io.Writer, level hclog.Level) (plugins.Backend, int) {
	t.Helper()
	cfg := plugins.ClientConfig(cmd)
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "backend", Level: level, Output: logs})
	client := plugin.NewClient(cfg)
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		t.Fatal(err)
	}
	b, err := plugins.Dispense(rpc)
	if err != nil {
		t.Fatal(err)
	}
	return b, client.ReattachConfig().Pid
}
