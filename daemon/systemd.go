package daemon

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
)

// statusLine is systemd's STATUS= line: GPUs, leases and queue.
func (d *Daemon) statusLine() string {
	v := d.eng.Summary()
	return fmt.Sprintf("%d GPUs (%s), %d leases, %d queued", v.GPUs, v.Provider, v.Leases, v.Queued)
}

// updateStatus sends the status line when it changed (after each reading).
// Nothing goes out before READY=1, which carries the first status line.
func (d *Daemon) updateStatus() {
	if !d.ready.Load() {
		return
	}
	if st := d.statusLine(); st != d.lastStatus {
		d.notify("STATUS=" + st)
		d.lastStatus = st
	}
}

// watchdog pings systemd's watchdog through the engine's owner loop, so a
// stuck loop stops the pings and systemd restarts the daemon.
func (d *Daemon) watchdog(ctx context.Context) {
	interval, err := sddaemon.SdWatchdogEnabled(false)
	if err != nil || interval == 0 {
		return
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, interval/2)
		if err := d.eng.Ping(pctx); err == nil {
			d.notify("WATCHDOG=1")
		} else {
			d.log.Error("placement loop does not answer; withholding the watchdog ping", "err", err)
		}
		cancel()
		t.Reset(interval / 2)
	}
}

func (d *Daemon) notifyReady() {
	d.notify("READY=1\nSTATUS=" + d.statusLine())
	d.ready.Store(true)
}

// notify sends a state line to systemd when NOTIFY_SOCKET is set.
func (d *Daemon) notify(state string) {
	if _, err := sddaemon.SdNotify(false, state); err != nil {
		d.log.Warn("sd_notify failed", "state", state, "err", err)
	}
}

// canKillOthers reports whether the daemon may signal processes of other
// users: root, or CAP_KILL in its effective set (bit 5 of CapEff).
func canKillOthers() bool {
	if os.Getuid() == 0 {
		return true
	}
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(rest), 16, 64)
			return err == nil && caps&(1<<5) != 0
		}
	}
	return false
}
