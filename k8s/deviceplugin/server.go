package deviceplugin

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// deviceServer is the gRPC face of a Plugin to the kubelet.
type deviceServer struct {
	pluginapi.UnimplementedDevicePluginServer
	p *Plugin
}

var _ pluginapi.DevicePluginServer = deviceServer{}

// pluginOptions are the plugin's options: GetPreferredAllocation, yes (it
// refuses a request no single GPU holds); PreStartContainer, no.
func pluginOptions() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}
}

// GetDevicePluginOptions returns pluginOptions.
func (deviceServer) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return pluginOptions(), nil
}

// GetPreferredAllocation picks the units of each container and refuses one
// that no single GPU holds.
func (s deviceServer) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	resp, err := s.p.preferred(req)
	if err != nil {
		s.p.log.Warn("preferred allocation refused", "err", err)
	}
	return resp, err
}

// ListAndWatch sends the device list, then every change; a (re)started
// stream also triggers a reconciliation of pods and leases.
func (s deviceServer) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	s.p.reconcileSoon()
	for {
		devs, changed := s.p.current()
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return fmt.Errorf("list and watch: send: %w", err)
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

// Allocate grants a lease per container.
func (s deviceServer) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp, err := s.p.allocate(ctx, req)
	if err != nil {
		s.p.log.Warn("allocate failed", "err", err)
	}
	return resp, err
}

// PreStartContainer is not requested (see GetDevicePluginOptions).
func (deviceServer) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
