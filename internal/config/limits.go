package config

import (
	"time"

	"github.com/wsched/wsched/internal/units"
)

// Limits is the [limits] section: what one user (uid) may hold at once, so
// that one local user cannot starve the others. Root is not limited. 0 means
// no limit.
type Limits struct {
	// Leases bounds the granted leases of one uid.
	Leases int `toml:"leases"`
	// Queued bounds the lease requests of one uid waiting at once.
	Queued int `toml:"queued"`
	// Bytes bounds the GPU memory of one uid: granted leases plus waiting
	// requests.
	Bytes units.Bytes `toml:"bytes"`
	// ActiveJobs bounds the jobs of one uid not yet finished.
	ActiveJobs int `toml:"active_jobs"`
	// StoredJobs bounds the jobs of one uid kept, finished ones included.
	StoredJobs int `toml:"stored_jobs"`
	// TokenActiveJobs and TokenStoredJobs are active_jobs and stored_jobs
	// for the holder of [daemon] http_token (all TCP clients together).
	TokenActiveJobs int `toml:"token_active_jobs"`
	TokenStoredJobs int `toml:"token_stored_jobs"`
	// Subscribers bounds the event streams (/v1/events, the monitor's) of
	// one uid.
	Subscribers int `toml:"subscribers"`
	// TokenSubscribers bounds those of the TCP token's bearer: all TCP
	// clients together count as one user.
	TokenSubscribers int `toml:"token_subscribers"`
	// MinLease is the smallest GPU lease a request may ask for.
	MinLease units.Bytes `toml:"min_lease"`
	// PriorityGroup names the group whose members (and root) may ask for
	// priority high; "" leaves it to root.
	PriorityGroup string `toml:"priority_group"`
}

func defaultLimits() Limits {
	return Limits{Leases: 256, Queued: 64, ActiveJobs: 32, StoredJobs: 1000, Subscribers: 16, TokenSubscribers: 16,
		MinLease: units.Bytes(units.MiB), PriorityGroup: ""}
}

func (l Limits) validate() error {
	for _, v := range []struct {
		key string
		n   int
	}{{"leases", l.Leases}, {"queued", l.Queued}, {"active_jobs", l.ActiveJobs}, {"stored_jobs", l.StoredJobs}, {"subscribers", l.Subscribers},
		{"token_subscribers", l.TokenSubscribers}, {"token_active_jobs", l.TokenActiveJobs}, {"token_stored_jobs", l.TokenStoredJobs}} {
		if v.n < 0 {
			return bad("limits."+v.key, "%d is not allowed: want 0 (no limit) or more", v.n)
		}
	}
	if l.Bytes < 0 {
		return bad("limits.bytes", "%s is not allowed: want 0 (no limit) or more", l.Bytes.Exact())
	}
	if l.MinLease < 0 {
		return bad("limits.min_lease", "%s is not allowed: want 0 or more", l.MinLease.Exact())
	}
	return nil
}

// connDefaults are the [daemon] keys that bound connections.
func connDefaults(d *Daemon) {
	d.IdleTimeout = units.Duration(2 * time.Minute)
	d.HeaderTimeout = units.Duration(10 * time.Second)
	d.BodyTimeout = units.Duration(30 * time.Second)
	d.WriteTimeout = units.Duration(30 * time.Second)
	d.MaxConnections = 4096
	d.MaxConnectionsPerUID = 64
	d.TCPMaxConnections = 256
	d.TCPHeaderTimeout = units.Duration(5 * time.Second)
}

func (d Daemon) validateConns() error {
	for _, v := range []struct {
		key string
		d   units.Duration
	}{{"idle_timeout", d.IdleTimeout}, {"header_timeout", d.HeaderTimeout}, {"body_timeout", d.BodyTimeout}, {"write_timeout", d.WriteTimeout},
		{"tcp_header_timeout", d.TCPHeaderTimeout}} {
		if v.d <= 0 {
			return bad("daemon."+v.key, "%s is not allowed: want a duration above 0", v.d)
		}
	}
	switch {
	case d.MaxConnections < 0:
		return bad("daemon.max_connections", "%d is not allowed: want 0 (no limit) or more", d.MaxConnections)
	case d.MaxConnectionsPerUID < 0:
		return bad("daemon.max_connections_per_uid", "%d is not allowed: want 0 (no limit) or more", d.MaxConnectionsPerUID)
	case d.TCPMaxConnections < 0:
		return bad("daemon.tcp_max_connections", "%d is not allowed: want 0 (no limit) or more", d.TCPMaxConnections)
	}
	return nil
}

func spoolDefaults(j *Jobs) {
	j.SpoolQuota = units.Bytes(8 * units.GiB)
	j.MinFreeDisk = units.Bytes(units.GiB)
	j.UploadTimeout = units.Duration(10 * time.Minute)
}

func (j Jobs) validateSpool() error {
	switch {
	case j.SpoolDir != "" && !isAbs(j.SpoolDir):
		return bad("jobs.spool_dir", "%q is not allowed: want an absolute path", j.SpoolDir)
	case j.SpoolQuota != 0 && j.SpoolQuota < j.MaxUpload:
		return bad("jobs.spool_quota", "%s is less than max_upload (%s): want 0 (no quota) or at least max_upload", j.SpoolQuota.Exact(), j.MaxUpload.Exact())
	case j.MinFreeDisk < 0:
		return bad("jobs.min_free_disk", "%s is not allowed: want 0 or more", j.MinFreeDisk.Exact())
	case j.UploadTimeout <= 0:
		return bad("jobs.upload_timeout", "%s is not allowed: want a duration above 0", j.UploadTimeout)
	}
	return nil
}
