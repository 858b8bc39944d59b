package device

import (
	"fmt"
	"slices"
	"strings"
)

// Pin is the device the environment names for a client, as the machine
// knows it: WSCHED_DEVICE, else SENSEVOICE_DEVICE, read relative to the
// lease the shell runs under (see PinFromEnv).
type Pin struct {
	// Spec is the device on the machine: inside a lease, cuda:N is the
	// N-th device CUDA_VISIBLE_DEVICES leaves visible (by UUID).
	Spec Spec
	// Var is the variable that set it and Raw its text; "" when neither
	// is set (Spec is auto).
	Var, Raw string
	// Lease is WSCHED_LEASE_ID when the environment is a lease's.
	Lease string
	// Visible is the lease's CUDA_VISIBLE_DEVICES, split.
	Visible []string
	// Relative: Raw was read relative to the lease (Spec differs from it).
	Relative bool
}

// PinFromEnv reads the device pin from the environment (lookup is
// os.LookupEnv or a stand-in). Inside a lease — WSCHED_LEASE_ID and
// CUDA_VISIBLE_DEVICES set, as `wsched lease` and `wsched run` export them —
// a process sees only the lease's GPU, as cuda:0, so the cuda:N a lease
// exported (SENSEVOICE_DEVICE=cuda:0) names the visible device N, not the
// machine's GPU N. A pin the environment contradicts — an index past the
// visible devices, a UUID they hide, a GPU in a CPU lease — is an error
// that says why.
func PinFromEnv(lookup func(string) (string, bool)) (Pin, error) {
	var p Pin
	var err error
	if p.Spec, p.Var, err = FromEnv(lookup); err != nil {
		return p, err
	}
	p.Raw, _ = lookup(p.Var)
	lease, _ := lookup("WSCHED_LEASE_ID")
	cvd, set := lookup("CUDA_VISIBLE_DEVICES")
	if lease == "" || !set {
		return p, nil
	}
	p.Lease = lease
	for _, d := range strings.Split(cvd, ",") {
		if d = strings.TrimSpace(d); d != "" {
			p.Visible = append(p.Visible, d)
		}
	}
	return p, p.relative()
}

// relative reads p.Spec against the lease's visible devices.
func (p *Pin) relative() error {
	where := fmt.Sprintf("%s=%s inside lease %s", p.Var, p.Raw, p.Lease)
	switch p.Spec.Kind {
	case Index:
		if len(p.Visible) == 0 {
			return fmt.Errorf("%w: %s: CUDA_VISIBLE_DEVICES is empty (a CPU lease), so no GPU is visible; set %s=cpu or leave the lease's shell", ErrInvalid, where, p.Var)
		}
		if p.Spec.Index >= len(p.Visible) {
			return fmt.Errorf("%w: %s: CUDA_VISIBLE_DEVICES=%s makes only %s visible", ErrInvalid, where, strings.Join(p.Visible, ","), visibleRange(len(p.Visible)))
		}
		phys, err := Parse(p.Visible[p.Spec.Index])
		if err != nil || phys.Kind == Auto || phys.Kind == CPU {
			phys, err = Parse("cuda:" + p.Visible[p.Spec.Index]) // CUDA_VISIBLE_DEVICES=3: an index
		}
		if err != nil {
			return fmt.Errorf("%s: CUDA_VISIBLE_DEVICES entry %q names no GPU: %w", where, p.Visible[p.Spec.Index], err)
		}
		p.Spec, p.Relative = phys, true
	case UUID:
		if len(p.Visible) == 0 {
			return fmt.Errorf("%w: %s: CUDA_VISIBLE_DEVICES is empty (a CPU lease), so GPU %s is hidden", ErrInvalid, where, p.Spec.UUID)
		}
		if !slices.ContainsFunc(p.Visible, func(d string) bool { return strings.EqualFold(d, p.Spec.UUID) || !strings.Contains(d, "-") }) {
			return fmt.Errorf("%w: %s: CUDA_VISIBLE_DEVICES=%s hides that GPU", ErrInvalid, where, strings.Join(p.Visible, ","))
		}
	}
	return nil
}

func visibleRange(n int) string {
	if n == 1 {
		return "cuda:0"
	}
	return fmt.Sprintf("cuda:0 to cuda:%d", n-1)
}
