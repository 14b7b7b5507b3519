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
	d.mu.Lock()
	if len(d.failPause) > 0 {
		err := d.failPause[0]
		d.failPause = d.failPause[1:]
		d.mu.Unlock()
		return err
	}
	d.mu.Unlock()
	return d.setPaused(id, true)
}

// FailNextPauses makes the next n Pause calls return err and leave the
// container running, as the engine does when its freezer gives up.
func (d *Driver) FailNextPauses(n int, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for range n {
		d.failPause = append(d.failPause, err)
	}
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
