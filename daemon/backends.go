package daemon

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/wsched/wsched/models"
)

// discoverBackends asks the backends in the plugin directories for their
// descriptors and checks the [[models.model]] entries against them: an
// option a backend does not have, or of the wrong type, is an error naming
// its key.
func (d *Daemon) discoverBackends(ctx context.Context) error {
	set, err := d.host.Rescan(ctx)
	if err != nil {
		return fmt.Errorf("discover backends: %w", err)
	}
	if err := models.Check(d.cfg.Models, set); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// rediscoverOnHangup returns the loop that discovers the backends again on
// every SIGHUP (a backend installed, upgraded or removed) until its context
// ends. The signal is caught from the call on, before the loop runs, so a
// SIGHUP right after start-up does not end the process.
func (d *Daemon) rediscoverOnHangup() func(context.Context) error {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGHUP)
	return func(ctx context.Context) error {
		defer signal.Stop(sig)
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-sig:
				if err := d.discoverBackends(ctx); err != nil {
					d.log.Error("SIGHUP: backends rediscovered, but a model entry does not fit its backend", "err", err)
				}
			}
		}
	}
}
