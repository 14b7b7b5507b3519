package sessiontest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/kernel"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
	"github.com/agentbox/agentbox/session"
)

// SandboxImage is the reference NewDriver registers as a current sandbox
// image; it is config.Default().SandboxImage.
const SandboxImage = "agentbox-sandbox:latest"

// MemoryBytes is what MemoryUsage reports for every running container.
const MemoryBytes = 48 << 20

// Driver is an in-memory session.Driver: containers are records, and each
// running container has a fake kernel (see the package documentation) that
// speaks the real wire protocol over net.Pipe. It is safe for concurrent use.
type Driver struct {
	mu          sync.Mutex
	images      map[string]session.Image // by reference
	containers  map[string]*container    // by id
	names       map[string]string        // name -> id
	history     []change                 // every change of the container set, for Peak
	created     int
	unavailable bool
	failCreate  error
	failPause   []error // what the next Pause calls return, in turn
	hostMemory  int64   // EngineMemory; 0: unknown
}

// container is one container and its kernel. Its fields are guarded by
// Driver.mu; the kernel has locks of its own.
type container struct {
	c      session.Container
	kernel *fakeKernel
}

// change is one step of the container set's history: c is nil when the
// container was removed.
type change struct {
	id string
	c  *session.Container
}

// NewDriver returns a Driver with no containers that knows one image,
// SandboxImage, labelled as the current sandbox image.
func NewDriver() *Driver {
	d := &Driver{
		images:     map[string]session.Image{},
		containers: map[string]*container{},
		names:      map[string]string{},
	}
	d.AddSandboxImage(SandboxImage)
	return d
}

// AddImage registers an image under ref with labels and returns its ID.
// Registering a ref again replaces the image (as a rebuild would).
func (d *Driver) AddImage(ref string, labels map[string]string) string {
	id := "sha256:" + randomHex(32)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.images[ref] = session.Image{ID: id, Labels: maps.Clone(labels)}
	return id
}

// AddSandboxImage registers ref as an image built from the current sandbox
// sources, speaking kernel.ProtocolVersion, so that session.NewManager
// accepts it; it returns the image ID.
func (d *Driver) AddSandboxImage(ref string) string {
	return d.AddImage(ref, map[string]string{
		sandboximage.LabelProtocol:   strconv.Itoa(kernel.ProtocolVersion),
		sandboximage.LabelSourceHash: sandboximage.SourceHash(),
	})
}

// SetUnavailable makes every Driver call fail with session.ErrUnavailable
// while on is set, as if the engine could not be reached. Kernel streams
// already open keep working.
func (d *Driver) SetUnavailable(on bool) {
	d.mu.Lock()
	d.unavailable = on
	d.mu.Unlock()
}

// FailNextCreate makes the next Create return err without creating anything.
func (d *Driver) FailNextCreate(err error) {
	d.mu.Lock()
	d.failCreate = err
	d.mu.Unlock()
}

// Kill stops container id as SIGKILL would (exit code 137): its kernel and
// its state are gone and every stream to it breaks. The record stays, like a
// stopped container's, until Remove.
func (d *Driver) Kill(id string) {
	d.mu.Lock()
	ct := d.containers[id]
	if ct == nil || !ct.c.Running {
		d.mu.Unlock()
		return
	}
	ct.c.Running, ct.c.Status, ct.c.ExitCode = false, "exited", 137
	d.record(ct)
	d.mu.Unlock()
	ct.kernel.stop()
}

// RemoveBehindBack removes container id as someone else would (docker rm
// -f), even while the driver is unavailable.
func (d *Driver) RemoveBehindBack(id string) { d.remove(id) }

// Containers returns every container, running or not.
func (d *Driver) Containers() []session.Container {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]session.Container, 0, len(d.containers))
	for _, ct := range d.containers {
		out = append(out, snapshot(ct.c))
	}
	return out
}

// Created returns how many containers Create has made.
func (d *Driver) Created() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.created
}

// Peak returns the largest number of containers matching match that existed
// at the same time since the Driver was made.
func (d *Driver) Peak(match func(session.Container) bool) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	live := map[string]bool{}
	peak := 0
	for _, ch := range d.history {
		if ch.c != nil && match(*ch.c) {
			live[ch.id] = true
		} else {
			delete(live, ch.id)
		}
		peak = max(peak, len(live))
	}
	return peak
}

// record appends ct's current state to the history; d.mu is held.
func (d *Driver) record(ct *container) {
	c := snapshot(ct.c)
	d.history = append(d.history, change{id: c.ID, c: &c})
}

// check fails while the driver is unavailable; d.mu is held.
func (d *Driver) check() error {
	if d.unavailable {
		return fmt.Errorf("%w: the fake engine is switched off", session.ErrUnavailable)
	}
	return nil
}

// Image describes the image registered under ref.
func (d *Driver) Image(ctx context.Context, ref string) (session.Image, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(); err != nil {
		return session.Image{}, err
	}
	img, ok := d.images[ref]
	if !ok {
		return session.Image{}, fmt.Errorf("%w: %s", session.ErrImageMissing, ref)
	}
	return session.Image{ID: img.ID, Labels: maps.Clone(img.Labels)}, nil
}

// namePattern is the engine's rule for container names.
var namePattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)

// Create makes a running container with a fresh kernel.
func (d *Driver) Create(ctx context.Context, spec session.Spec) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(); err != nil {
		return "", err
	}
	if err := d.failCreate; err != nil {
		d.failCreate = nil
		return "", err
	}
	img, ok := d.images[spec.Image]
	if !ok {
		return "", fmt.Errorf("create container: %w: %s", session.ErrImageMissing, spec.Image)
	}
	id := randomHex(32)
	name := spec.Name
	if name == "" {
		name = "fake_" + id[:12]
	}
	if !namePattern.MatchString(name) {
		return "", fmt.Errorf("create container: invalid name %q", name)
	}
	if _, taken := d.names[name]; taken {
		return "", fmt.Errorf("create container %s: %w", name, session.ErrNameInUse)
	}
	ct := &container{
		c: session.Container{
			ID: id, Name: name, Image: img.ID, Labels: maps.Clone(spec.Labels),
			Running: true, Status: "running", Created: time.Now(),
		},
		kernel: newKernel(maxOutput(spec.Env)),
	}
	d.containers[id] = ct
	d.names[name] = id
	d.created++
	d.record(ct)
	return id, nil
}

// maxOutput reads AGENTBOX_MAX_OUTPUT from a container's environment, as the
// init does.
func maxOutput(env []string) int {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "AGENTBOX_MAX_OUTPUT="); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return 1 << 20
}

// Connect returns a new stream to the kernel of running container id.
func (d *Driver) Connect(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(); err != nil {
		return nil, err
	}
	ct, err := d.lookup(id)
	if err != nil {
		return nil, fmt.Errorf("connect to container %s: %w", id, err)
	}
	if !ct.c.Running {
		return nil, fmt.Errorf("connect to container %s: it is not running", id)
	}
	host, init := net.Pipe()
	if !ct.kernel.serve(init) {
		host.Close()
		return nil, fmt.Errorf("connect to container %s: it is not running", id)
	}
	return host, nil
}

// lookup finds a container by id or name; d.mu is held.
func (d *Driver) lookup(idOrName string) (*container, error) {
	if ct, ok := d.containers[idOrName]; ok {
		return ct, nil
	}
	if id, ok := d.names[idOrName]; ok {
		return d.containers[id], nil
	}
	return nil, fmt.Errorf("%w: %s", session.ErrContainerNotFound, idOrName)
}

// Inspect describes a container by id or name.
func (d *Driver) Inspect(ctx context.Context, idOrName string) (session.Container, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(); err != nil {
		return session.Container{}, err
	}
	ct, err := d.lookup(idOrName)
	if err != nil {
		return session.Container{}, fmt.Errorf("inspect container: %w", err)
	}
	return snapshot(ct.c), nil
}

// List returns the containers carrying every label in labels.
func (d *Driver) List(ctx context.Context, labels map[string]string) ([]session.Container, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(); err != nil {
		return nil, err
	}
	out := []session.Container{}
next:
	for _, ct := range d.containers {
		for k, v := range labels {
			if got, ok := ct.c.Labels[k]; !ok || got != v {
				continue next
			}
		}
		out = append(out, snapshot(ct.c))
	}
	return out, nil
}

// Rename gives container id a new name.
func (d *Driver) Rename(ctx context.Context, id, name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(); err != nil {
		return err
	}
	ct, err := d.lookup(id)
	if err != nil {
		return fmt.Errorf("rename container: %w", err)
	}
	if !namePattern.MatchString(name) {
		return fmt.Errorf("rename container %s: invalid name %q", id, name)
	}
	if other, taken := d.names[name]; taken && other != ct.c.ID {
		return fmt.Errorf("rename container %s to %s: %w", id, name, session.ErrNameInUse)
	}
	delete(d.names, ct.c.Name)
	ct.c.Name = name
	d.names[name] = ct.c.ID
	d.record(ct)
	return nil
}

// Remove kills and removes a container; one already gone is no error.
func (d *Driver) Remove(ctx context.Context, id string) error {
	d.mu.Lock()
	err := d.check()
	d.mu.Unlock()
	if err != nil {
		return err
	}
	d.remove(id)
	return nil
}

func (d *Driver) remove(idOrName string) {
	d.mu.Lock()
	ct, err := d.lookup(idOrName)
	if err != nil {
		d.mu.Unlock()
		return
	}
	delete(d.containers, ct.c.ID)
	delete(d.names, ct.c.Name)
	d.history = append(d.history, change{id: ct.c.ID})
	d.mu.Unlock()
	ct.kernel.stop()
}

// SetEngineMemory sets what EngineMemory reports as the memory of the
// engine's host, in bytes; 0 (the default) means unknown.
func (d *Driver) SetEngineMemory(bytes int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hostMemory = bytes
}

// EngineMemory reports the memory SetEngineMemory set.
func (d *Driver) EngineMemory(ctx context.Context) (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(); err != nil {
		return 0, err
	}
	return d.hostMemory, nil
}

// MemoryUsage reports MemoryBytes for a running container and 0 for a
// stopped one.
func (d *Driver) MemoryUsage(ctx context.Context, id string) (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.check(); err != nil {
		return 0, err
	}
	ct, err := d.lookup(id)
	if err != nil {
		return 0, fmt.Errorf("stats of container: %w", err)
	}
	if !ct.c.Running {
		return 0, nil
	}
	return MemoryBytes, nil
}

// snapshot copies c so that callers cannot change the driver's record.
func snapshot(c session.Container) session.Container {
	c.Labels = maps.Clone(c.Labels)
	return c
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var _ session.Driver = (*Driver)(nil)
