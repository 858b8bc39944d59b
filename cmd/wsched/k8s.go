package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/k8s/deviceplugin"
	"github.com/wsched/wsched/k8s/dra"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

func newK8sCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "k8s",
		Short: "Kubernetes node agent (see docs/kubernetes.md)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newDevicePluginCmd(a), newDRADriverCmd(a))
	return cmd
}

func newDRADriverCmd(a *app) *cobra.Command {
	var node, server, tokenFile, caFile, pluginDir, registryDir, cdiDir string
	var step string
	cmd := &cobra.Command{
		Use:   "dra-driver",
		Short: "Publish GPUs with consumable memory to Kubernetes DRA (" + dra.DriverName + ")",
		Long: `Run the Dynamic Resource Allocation driver ` + dra.DriverName + `: publish a
ResourceSlice with one device per placeable GPU of this node and consumable
capacity "memory" (what wsched can lease there; KEP-5075, resource.k8s.io/v1,
feature gate DRAConsumableCapacity), and on the kubelet's NodePrepareResources
take a lease of the claimed memory on the GPU the scheduler chose, handing the
container its environment through a CDI spec; NodeUnprepareResources releases
it. Prepared claims are recorded in --plugin-dir/checkpoint.json; at start-up
the driver reconciles that record, its daemon leases and its CDI specs with the
claims of the API server (leases of claims unprepared or deleted while it was
down are released, prepared claims keep theirs). Deployed by
packaging/kubernetes/dra/driver.yaml; experimental: see docs/kubernetes.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, cfg, err := a.client()
			if err != nil {
				return err
			}
			defer c.Close()
			if node == "" {
				if node = os.Getenv("NODE_NAME"); node == "" {
					if node, err = os.Hostname(); err != nil {
						return fmt.Errorf("dra driver: node name: %w", err)
					}
				}
			}
			as, err := dra.NewAPIServer(server, tokenFile, caFile)
			if err != nil {
				return err
			}
			stepBytes, err := units.ParseBytes(step)
			if err != nil {
				return fmt.Errorf("dra driver: --step: %w", err)
			}
			k := cfg.Kubernetes
			d, err := dra.New(dra.Options{
				Daemon: c, Claims: as, Slices: as, Log: a.logger(cfg).With("component", "dra-driver"),
				Node: node, Step: stepBytes, Interval: k.Interval.D(), LeaseTTL: k.LeaseTTL.D(),
				PluginDir: pluginDir, RegistryDir: registryDir, CDIDir: cdiDir,
			})
			if err != nil {
				return err
			}
			return d.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&node, "node", "", "this node's name (default $NODE_NAME, else the host name)")
	f.StringVar(&server, "api-server", "", "the API server, https://HOST:PORT (default: in-cluster)")
	f.StringVar(&tokenFile, "token-file", dra.InClusterToken, "bearer token for the API server")
	f.StringVar(&caFile, "ca-file", dra.InClusterCA, "CA certificate of the API server")
	f.StringVar(&pluginDir, "plugin-dir", "/var/lib/kubelet/plugins/"+dra.DriverName, "where the driver's kubelet socket and its checkpoint of prepared claims go")
	f.StringVar(&registryDir, "registry-dir", "/var/lib/kubelet/plugins_registry", "the kubelet's plugin registry")
	f.StringVar(&cdiDir, "cdi-dir", "/var/run/cdi", "where CDI specs are written")
	f.StringVar(&step, "step", "256MiB", "granularity of published capacity and of requests")
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
