package sessiontest

import (
	"context"
	"fmt"
)

// Pause marks a running container paused, as the engine's freezer does;
// the Manager then refuses calls on its session before they reach the
// kernel. A container already paused, or not running, is an error, as in
// the engine.
func (d *Driver) Pause(ctx context.Context, id string) error {
	return d.setPaused(id, true)
}

// Unpause clears what Pause set.
func (d *Driver) Unpause(ctx context.Context, id string) error {
	return d.setPaused(id, false)
}

func (d *Driver) setPaused(id string, paused bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(); err != nil {
		return err
	}
	ct, err := d.lookup(id)
	if err != nil {
		return err
	}
	if !ct.c.Running || ct.c.Paused == paused {
		return fmt.Errorf("container %s is %s: conflict", id, ct.c.Status)
	}
	ct.c.Paused = paused
	ct.c.Status = "running"
	if paused {
		ct.c.Status = "paused"
	}
	d.record(ct)
	return nil
}
