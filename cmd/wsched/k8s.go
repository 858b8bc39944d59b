package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/wsched/wsched/k8s/deviceplugin"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

func newK8sCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "k8s",
		Short: "Kubernetes node agent (see docs/kubernetes.md)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newDevicePluginCmd(a))
	return cmd
}

func newDevicePluginCmd(a *app) *cobra.Command {
	var pluginDir, podResources, devRoot, procRoot string
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "device-plugin",
		Short: "Advertise GPU memory to the kubelet as " + deviceplugin.ResourceName,
		Long: `Run the kubelet device plugin: advertise this node's GPU memory as extended
resource ` + deviceplugin.ResourceName + ` in units of [kubernetes] unit (usable memory of
healthy, non-MIG GPUs less foreign use), and turn each container's allocation
into a lease of the local wsched daemon (one GPU, its env in the container),
released when the pod is gone. Runs next to 'wsched serve' on every GPU node
(packaging/kubernetes/).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, cfg, err := a.client()
			if err != nil {
				return err
			}
			defer c.Close()
			k := cfg.Kubernetes
			p, err := deviceplugin.New(deviceplugin.Options{
				Daemon: c, Log: a.logger(cfg).With("component", "device-plugin"),
				Unit: int64(k.Unit), Interval: k.Interval.D(), LeaseTTL: k.LeaseTTL.D(), Grace: grace,
				PluginDir: pluginDir, PodResources: podResources, DevRoot: devRoot, ProcRoot: procRoot,
			})
			if err != nil {
				return err
			}
			return p.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&pluginDir, "plugin-dir", pluginapi.DevicePluginPath, "the kubelet's device-plugin directory (kubelet.sock)")
	f.StringVar(&podResources, "pod-resources", deviceplugin.DefaultPodResources, "the kubelet's pod-resources socket")
	f.StringVar(&devRoot, "dev-root", "/dev", "where the NVIDIA device nodes are")
	f.StringVar(&procRoot, "proc-root", "/proc", "the host's /proc (hostPID), to attribute container processes")
	f.DurationVar(&grace, "grace", 30*time.Second, "keep a new lease this long before the kubelet must list its pod")
	return cmd
}
