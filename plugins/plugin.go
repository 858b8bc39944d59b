package plugins

import (
	"context"
	"fmt"
	"os"
	"os/exec"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pb "github.com/wsched/wsched/plugins/proto"
)

// Handshake values. Bump ProtocolVersion on any change old peers would
// misread (it goes with a new protobuf package, wsched.backend.v2).
const (
	ProtocolVersion  = 1
	MagicCookieKey   = "WSCHED_BACKEND_PLUGIN"
	MagicCookieValue = "8c1f5e0a7d3b4e21b6f9a2c4d0e7b35f"
	// PluginName is the one plugin a backend binary serves.
	PluginName = "backend"
)

// Handshake is the go-plugin handshake host and backend share. The cookie
// only keeps a backend binary from being run by hand by mistake.
func Handshake() plugin.HandshakeConfig {
	return plugin.HandshakeConfig{
		ProtocolVersion:  ProtocolVersion,
		MagicCookieKey:   MagicCookieKey,
		MagicCookieValue: MagicCookieValue,
	}
}

// PluginSet is the plugin map: impl on the backend side, nil on the host side.
func PluginSet(impl Backend) plugin.PluginSet {
	return plugin.PluginSet{PluginName: &grpcPlugin{impl: impl}}
}

// Serve runs impl as a go-plugin gRPC server on the process's stdio handshake
// and returns when the host is done with it. Call it from main.
func Serve(impl Backend) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake(),
		Plugins:         PluginSet(impl),
		GRPCServer:      plugin.DefaultGRPCServer,
	})
}

// ClientConfig is the host's go-plugin configuration for running cmd as a
// backend: gRPC only, AutoMTLS. Callers add Logger, SyncStderr and so on.
//
// cmd.Env is the backend's whole environment (nil means os.Environ()):
// go-plugin would otherwise append the host's environment after it, and the
// host's own CUDA_VISIBLE_DEVICES would override the lease's.
func ClientConfig(cmd *exec.Cmd) *plugin.ClientConfig {
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	return &plugin.ClientConfig{
		SkipHostEnv:      true,
		HandshakeConfig:  Handshake(),
		Plugins:          PluginSet(nil),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
	}
}

// Dispense returns the Backend behind a connected go-plugin client; after this
// the host never sees gRPC again.
func Dispense(c plugin.ClientProtocol) (Backend, error) {
	raw, err := c.Dispense(PluginName)
	if err != nil {
		return nil, fmt.Errorf("plugins: dispense %q: %w", PluginName, err)
	}
	b, ok := raw.(Backend)
	if !ok {
		return nil, fmt.Errorf("plugins: dispense %q: got %T, not a Backend", PluginName, raw)
	}
	return b, nil
}

// grpcPlugin is the go-plugin glue between Backend and the gRPC shims.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl Backend
}

var _ plugin.GRPCPlugin = (*grpcPlugin)(nil)

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterBackendServer(s, &grpcServer{impl: p.impl})
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &grpcClient{client: pb.NewBackendClient(c)}, nil
}
