package config

import (
	"time"

	"github.com/wsched/wsched/internal/units"
)

// Kubernetes is the [kubernetes] section: `wsched k8s device-plugin`, which
// advertises GPU memory to the kubelet as extended resource
// wsched.io/gpu-memory and holds a lease per container that asks for it.
type Kubernetes struct {
	// Unit is the memory one unit of wsched.io/gpu-memory stands for.
	Unit units.Bytes `toml:"unit"`
	// Interval is how often the plugin re-reads the GPUs (and updates what
	// it advertises) and checks which pods still run (releasing the leases
	// of those gone, renewing the others).
	Interval units.Duration `toml:"interval"`
	// LeaseTTL is the TTL of a pod's lease; the plugin renews it every
	// interval, so it only runs out when the plugin is gone that long.
	LeaseTTL units.Duration `toml:"lease_ttl"`
}

func defaultKubernetes() Kubernetes {
	return Kubernetes{
		Unit:     units.Bytes(units.GiB),
		Interval: units.Duration(5 * time.Second),
		LeaseTTL: units.Duration(10 * time.Minute),
	}
}

func (k Kubernetes) validate() error {
	switch {
	case k.Unit < units.Bytes(units.MiB):
		return bad("kubernetes.unit", "%s is not allowed: want at least 1MiB", k.Unit.Exact())
	case k.Interval <= 0:
		return bad("kubernetes.interval", "%s is not allowed: want a duration above 0", k.Interval)
	case k.LeaseTTL < 2*k.Interval:
		return bad("kubernetes.lease_ttl", "%s is not allowed: want at least twice interval (%s)", k.LeaseTTL, k.Interval)
	}
	return nil
}
