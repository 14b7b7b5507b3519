package session_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/internal/dockertest"
	"github.com/agentbox/agentbox/session"
)

// bindDisk is a BIND configuration with a small disk per session.
func bindDisk(mb int) func(*config.Config) {
	return func(c *config.Config) {
		c.SessionStorage = config.StorageBind
		c.SessionDiskMB = mb
	}
}

// fillCode writes 1 MiB at a time to /session/big, up to 64 MiB, and
// prints how it ended: "errno 28 <MiB written>" or "wrote 64".
const fillCode = `import os
n = 0
try:
    with open('/session/big', 'wb') as f:
        for _ in range(64):
            f.write(b'x' * (1 << 20))
            f.flush()
            os.fsync(f.fileno())
            n += 1
except OSError as e:
    print('errno', e.errno, n)
else:
    print('wrote', n)
`

// TestBindDiskLimit: code in a BIND session writes past SESSION_DISK_MB.
// The kernel stops it with ENOSPC inside the sandbox; the session keeps
// working (it can free its space and write again), another session and the
// history are untouched, and the host's disk never saw more than the
// limit. Before, /session was a plain bind mount of SESSIONS_ROOT: the write
// went on until the host's disk (and the database on it) was full.
func TestBindDiskLimit(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, bindDisk(32))
	m := managerFor(t, cfg, namespace())
	mustExec(t, m, "other", "x = 41")
	res := mustExec(t, m, "filler", fillCode)
	fill, res0 := res.ID, res.Stdout
	var errno, n int
	if _, err := fmt.Sscanf(res.Stdout, "errno %d %d", &errno, &n); err != nil || errno != int(syscall.ENOSPC) || n > 32 {
		t.Fatalf("writing 64 MiB in a 32 MiB session: %q %v, want ENOSPC (28) before 32 MiB", res.Stdout, res.Error)
	}
	// The filler's own code still runs, and can free its space.
	res = mustExec(t, m, "filler", "import os\nos.remove('/session/big')\nopen('/session/small', 'w').write('ok')\nprint(open('/session/small').read())")
	if res.Stdout != "ok\n" || res.Error != nil {
		t.Fatalf("after the disk was full: %q %v", res.Stdout, res.Error)
	}
	if res := mustExec(t, m, "other", "x + 1"); plain(res) != "42" {
		t.Fatalf("another session after the fill: %+v", res)
	}
	// The history recorded everything.
	if got, err := m.Fetch(context.Background(), "filler", fill); err != nil || got.Stdout != res0 {
		t.Fatalf("the fill's record: %+v %v", got, err)
	}
}

// hostMounts returns the mount points of this process's mount table under
// dir.
func hostMounts(t testing.TB, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			out = append(out, fields[4])
		}
	}
	return out
}

// loopsOf returns what `losetup -j img` says: the loop devices backed by img.
func loopsOf(t *testing.T, img string) string {
	t.Helper()
	out, err := exec.Command("losetup", "-j", img).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup -j %s: %v %s", img, err, out)
	}
	return strings.TrimSpace(string(out))
}

// waitReleased waits until nothing is mounted at ws (nor under it) and no
// loop device is backed by img. Under gVisor only the host's mount is
// checked: Debian's runsc 0.0~20221219 on Docker 20.10 leaves an agentbox
// sandbox's runsc-sandbox and runsc-gofer processes (and their shim)
// running after the container is removed, and their mount namespace holds
// the loop device until they exit (README, gVisor).
func waitReleased(t *testing.T, ws, img string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mounts, loops := hostMounts(t, ws), loopsOf(t, img)
		if dockertest.IsGVisor() {
			loops = ""
		}
		if len(mounts) == 0 && loops == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session ended, still held: mounts %v, loop devices %q", mounts, loops)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBindDiskLifecycle: a BIND session's /session is a file system of its
// own (the sandbox's mountinfo names a loop device, not the host path of
// SESSIONS_ROOT); when the session ends (stopped, or its container removed
// behind the manager's back and found by a new manager's sweep) no mount
// and no loop device is left on the host, and the next session of the key
// finds its files.
func TestBindDiskLifecycle(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, bindDisk(32))
	ns := namespace()
	m := managerFor(t, cfg, ns)
	ctx := context.Background()
	res := mustExec(t, m, "k", "open('/session/keep.txt', 'w').write('kept')\nprint(open('/proc/self/mountinfo').read())")
	if strings.Contains(res.Stdout, cfg.SessionsRoot) {
		t.Fatalf("the sandbox's mountinfo names SESSIONS_ROOT:\n%s", res.Stdout)
	}
	ws := filepath.Join(cfg.SessionsRoot, session.ID("k"), session.WorkspaceDir)
	img := filepath.Join(cfg.SessionsRoot, session.ID("k"), session.DiskImage)
	if got := hostMounts(t, cfg.SessionsRoot); len(got) != 1 || got[0] != ws {
		t.Fatalf("host mounts under SESSIONS_ROOT: %v, want the workspace %s alone", got, ws)
	}
	if loopsOf(t, img) == "" {
		t.Fatalf("no loop device backs %s", img)
	}

	if err := m.Stop(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	waitReleased(t, ws, img)
	res = mustExec(t, m, "k", "print(open('/session/keep.txt').read())")
	if res.Stdout != "kept\n" {
		t.Fatalf("after a stop the key's files are gone: %q %v", res.Stdout, res.Error)
	}

	// The manager goes, its container is removed by someone else: a new
	// manager's sweep releases the disk left mounted.
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("docker", "rm", "-f", ns+"_"+session.ID("k")).Run(); err != nil {
		t.Fatal(err)
	}
	m2 := managerFor(t, cfg, ns, session.WithSweepInterval(100*time.Millisecond))
	waitReleased(t, ws, img)
	if _, err := m2.Exec(ctx, "k", "pass"); !errors.Is(err, session.ErrSessionLost) {
		t.Fatalf("first call after the container was removed: %v, want ErrSessionLost", err)
	}
	res = mustExec(t, m2, "k", "print(open('/session/keep.txt').read())")
	if res.Stdout != "kept\n" {
		t.Fatalf("after a lost container the key's files are gone: %q %v", res.Stdout, res.Error)
	}
}

// TestBindDiskReserve: a new BIND session whose disk would leave less than
// DISK_RESERVE_MB free on the file system of SESSIONS_ROOT is refused with
// ErrNoSpace, naming the settings; nothing is left behind.
func TestBindDiskReserve(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, func(c *config.Config) {
		bindDisk(32)(c)
		c.DiskReserveMB = math.MaxInt32
	})
	m := managerFor(t, cfg, namespace())
	_, err := m.Exec(context.Background(), "r", "pass")
	if !errors.Is(err, session.ErrNoSpace) || !strings.Contains(err.Error(), "DISK_RESERVE_MB") {
		t.Fatalf("a session past the reserve: %v, want ErrNoSpace naming DISK_RESERVE_MB", err)
	}
	if got := hostMounts(t, cfg.SessionsRoot); len(got) != 0 {
		t.Fatalf("a refused session left mounts: %v", got)
	}
	if _, err := os.Stat(filepath.Join(cfg.SessionsRoot, session.ID("r"), session.DiskImage)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused session left its image: %v", err)
	}
}

// TestPooledBindDisk: a warm container's disk becomes the key's: mounted at
// the key's workspace, its image among the key's records, released when
// the session stops (the warm folder gone with it), and mounted again with
// the key's files by the next session, which a warm container cannot serve.
func TestPooledBindDisk(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, func(c *config.Config) {
		bindDisk(32)(c)
		c.PoolSize = 1
	})
	ns := namespace()
	// No sweep: what the claim and the stop leave is what stays.
	m := managerFor(t, cfg, ns, session.WithSweepInterval(time.Hour))
	for deadline := time.Now().Add(time.Minute); m.PoolReady() < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pool never had a warm container ready")
		}
	}
	warm := hostMounts(t, cfg.SessionsRoot)
	ctx := context.Background()
	res := mustExec(t, m, "w", fillCode)
	if !strings.HasPrefix(res.Stdout, "errno 28 ") {
		t.Fatalf("a pooled BIND session wrote past its disk: %q %v", res.Stdout, res.Error)
	}
	mustExec(t, m, "w", "import os\nos.remove('/session/big')\nopen('/session/keep.txt', 'w').write('kept')")
	ws := filepath.Join(cfg.SessionsRoot, session.ID("w"), session.WorkspaceDir)
	img := filepath.Join(cfg.SessionsRoot, session.ID("w"), session.DiskImage)
	if data, err := os.ReadFile(filepath.Join(ws, "keep.txt")); err != nil || string(data) != "kept" {
		t.Fatalf("the host does not see the pooled session's files at its workspace: %q %v", data, err)
	}
	if loopsOf(t, img) == "" {
		t.Fatalf("no loop device backs %s", img)
	}
	if len(warm) != 1 || slices.Contains(hostMounts(t, cfg.SessionsRoot), warm[0]) {
		t.Fatalf("the warm disk %v is still mounted at its folder after the key took it", warm)
	}
	var key syscall.Stat_t
	if err := syscall.Stat(ws, &key); err != nil {
		t.Fatal(err)
	}
	for _, p := range hostMounts(t, cfg.SessionsRoot) {
		var st syscall.Stat_t
		if p != ws && syscall.Stat(p, &st) == nil && st.Dev == key.Dev {
			t.Fatalf("the key's disk is still mounted at the warm folder %s", p)
		}
	}
	if err := m.Stop(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	waitReleased(t, ws, img)
	for _, p := range hostMounts(t, cfg.SessionsRoot) {
		if !strings.Contains(p, ns+"_pool_") {
			t.Fatalf("left mounted after the pooled session stopped: %s", p)
		}
	}
	res = mustExec(t, m, "w", "print(open('/session/keep.txt').read())")
	if res.Stdout != "kept\n" {
		t.Fatalf("after a stop the pooled key's files are gone: %q %v", res.Stdout, res.Error)
	}
	// Closing drains the pool: no warm disk stays mounted (the session's
	// stays, for a manager that comes back for it).
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := hostMounts(t, cfg.SessionsRoot); len(got) != 1 || got[0] != ws {
		t.Fatalf("mounted after Close: %v, want the session's workspace alone", got)
	}
}

// smallDisk mounts a file system of mb MiB for the test (removed at its
// end) and returns its path.
func smallDisk(t *testing.T, mb int) string {
	t.Helper()
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "disk.img"), filepath.Join(dir, "mnt")
	for _, c := range [][]string{
		{"fallocate", "-l", fmt.Sprintf("%dM", mb), img},
		{"mkfs.ext4", "-q", "-F", "-m", "0", img},
		{"mkdir", mnt},
		{"mount", "-o", "loop", img, mnt},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", c, err, out)
		}
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	return mnt
}

// fillDisk writes a file in dir until its file system is full, and
// returns the file's path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	// Smaller writes take the last blocks too.
	for _, n := range []int{64 << 10, 4 << 10, 512} {
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
	return p
}

// TestDatabaseDiskFull: the file system holding the database is full (the
// disk a BIND session filled before there was a limit, or anything else on
// the host). An execution, and a new session, fail with ErrNoSpace naming
// the database's disk, which the HTTP APIs answer 507, not an internal
// error; once space is freed they work again.
func TestDatabaseDiskFull(t *testing.T) {
	t.Parallel()
	disk := smallDisk(t, 32)
	cfg := testConfig(t, func(c *config.Config) {
		c.ArtifactsDB = filepath.Join(disk, "artifacts.db")
		c.BlobstoreDir = filepath.Join(disk, "blobstore")
	})
	m := managerFor(t, cfg, namespace())
	ctx := context.Background()
	mustExec(t, m, "a", "x = 1")
	filler := fillDisk(t, disk)
	var errs []error
	for _, key := range []string{"a", "b"} {
		_, err := m.Exec(ctx, key, "x = 2")
		errs = append(errs, err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if !errors.Is(err, session.ErrNoSpace) || !strings.Contains(err.Error(), "ARTIFACTS_DB") || strings.Contains(err.Error(), disk) {
			t.Errorf("exec %d on a full database disk: %v, want ErrNoSpace naming ARTIFACTS_DB and not its path", i, err)
		}
	}
	if res := mustExec(t, m, "a", "x + 1"); plain(res) != "2" && plain(res) != "3" {
		t.Fatalf("after space was freed: %+v", res)
	}
}

// TestArtifactsKeepReserve: an artifact that would leave less than
// DISK_RESERVE_MB free on the blobstore's disk is not stored (said in
// skipped_artifacts, naming the setting), and retried at the next
// ingestion like any store failure. Before, ingestion copied every session's artifacts onto the
// host's disk until it was full.
func TestArtifactsKeepReserve(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, func(c *config.Config) { c.DiskReserveMB = math.MaxInt32 })
	m := managerFor(t, cfg, namespace())
	res := mustExec(t, m, "a", "open('/session/artifacts/big.bin', 'wb').write(b'x' * 100000)")
	if len(res.Artifacts) != 0 || len(res.SkippedArtifacts) != 1 || !strings.Contains(res.SkippedArtifacts[0].Reason, "DISK_RESERVE_MB") {
		t.Fatalf("an artifact past the reserve: stored %+v, skipped %+v", res.Artifacts, res.SkippedArtifacts)
	}
}

// TestBindDiskUnenforceable: a host that cannot make or mount a session's
// disk (here, no mkfs.ext4 or mount on PATH; elsewhere, not root or no
// loop devices) refuses to start a BIND session, naming the cause and
// SESSION_DISK_MB, rather than running it with no limit.
func TestBindDiskUnenforceable(t *testing.T) {
	cfg := testConfig(t, bindDisk(32))
	m := managerFor(t, cfg, namespace())
	t.Setenv("PATH", t.TempDir())
	_, err := m.Exec(context.Background(), "u", "pass")
	if err == nil || !strings.Contains(err.Error(), "SESSION_DISK_MB") || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("a session whose disk cannot be made: %v, want a refusal naming the cause and SESSION_DISK_MB", err)
	}
	if list, err := m.List(context.Background()); err != nil || len(list) != 0 {
		t.Fatalf("a refused session runs all the same: %+v %v", list, err)
	}
	if got := hostMounts(t, cfg.SessionsRoot); len(got) != 0 {
		t.Fatalf("a refused session left mounts: %v", got)
	}
}

// BenchmarkColdStartBind measures a new BIND session's first result with
// no disk limit (the plain bind mount), with a disk of 1024 MiB for a new
// key (allocate, mkfs.ext4, mount) and for a key that ran before (mount
// only), interleaved, against the cold-start floor.
func BenchmarkColdStartBind(b *testing.B) {
	plainM := newManager(b, func(c *config.Config) { c.SessionStorage = config.StorageBind; c.SessionDiskMB = 0 })
	diskM := newManager(b, bindDisk(1024))
	ctx := context.Background()
	cold := func(m *session.Manager, key string) time.Duration {
		start := time.Now()
		if _, err := m.Exec(ctx, key, "pass"); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		if err := m.Stop(ctx, key); err != nil {
			b.Fatal(err)
		}
		return d
	}
	var floor, plain, fresh, again samples
	for i := range dockertest.Rounds(8, 1) {
		key := fmt.Sprintf("cold-%d", i)
		floor = append(floor, coldFloor(b))
		plain = append(plain, cold(plainM, key))
		fresh = append(fresh, cold(diskM, key))
		again = append(again, cold(diskM, key))
	}
	report(b, "floor", floor, nil)
	report(b, "plain", plain, floor)
	report(b, "diskNew", fresh, floor)
	report(b, "diskAgain", again, floor)
	b.ReportMetric(float64(fresh.Pct(0.5))/float64(plain.Pct(0.5)), "diskNew/plain")
	b.ReportMetric(float64(again.Pct(0.5))/float64(plain.Pct(0.5)), "diskAgain/plain")
}

// TestBindDiskIdleEviction: an idle session's eviction releases its disk
// too, and the key's next session finds its files.
func TestBindDiskIdleEviction(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, func(c *config.Config) {
		bindDisk(32)(c)
		c.IdleTimeout = time.Second
	})
	m := managerFor(t, cfg, namespace(), session.WithSweepInterval(200*time.Millisecond))
	mustExec(t, m, "i", "open('/session/keep.txt', 'w').write('kept')")
	ws := filepath.Join(cfg.SessionsRoot, session.ID("i"), session.WorkspaceDir)
	waitReleased(t, ws, filepath.Join(cfg.SessionsRoot, session.ID("i"), session.DiskImage))
	res := mustExec(t, m, "i", "print(open('/session/keep.txt').read())")
	if res.Stdout != "kept\n" {
		t.Fatalf("after an idle eviction the key's files are gone: %q %v", res.Stdout, res.Error)
	}
}

// TestBindDiskTakesEarlierFiles: a key whose workspace folder holds files
// from before SESSION_DISK_MB finds them on its new disk (a link copied
// as a link, never followed); files too big for the disk refuse the
// session, naming the setting, and stay where they were.
func TestBindDiskTakesEarlierFiles(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, bindDisk(32))
	m := managerFor(t, cfg, namespace())
	earlier := func(key string) string {
		ws := filepath.Join(cfg.SessionsRoot, session.ID(key), session.WorkspaceDir)
		if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Dir(ws), 0o700); err != nil {
			t.Fatal(err)
		}
		return ws
	}
	ws := earlier("old")
	if err := os.WriteFile(filepath.Join(ws, "sub", "inner.txt"), []byte("from before"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	// The sandbox user's files, as its code would have left them.
	for _, p := range []string{"sub", "sub/inner.txt", "link"} {
		if err := os.Lchown(filepath.Join(ws, p), 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}
	res := mustExec(t, m, "old", "import os\nprint(open('/session/sub/inner.txt').read(), os.readlink('/session/link'))")
	if res.Stdout != "from before /etc/hostname\n" {
		t.Fatalf("earlier files on the new disk: %q %v", res.Stdout, res.Error)
	}
	if got := hostMounts(t, ws); len(got) != 1 {
		t.Fatalf("the workspace is not its own disk: mounts %v", got)
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(ws), "workspace.new")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the move left its mount point: %v", err)
	}

	ws = earlier("big")
	big := filepath.Join(ws, "big.bin")
	if err := os.WriteFile(big, make([]byte, 40<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := m.Exec(context.Background(), "big", "pass")
	if err == nil || !strings.Contains(err.Error(), "SESSION_DISK_MB") || strings.Contains(err.Error(), cfg.SessionsRoot) {
		t.Fatalf("40 MiB of earlier files for a 32 MiB disk: %v, want a refusal naming SESSION_DISK_MB, not the host's path", err)
	}
	if fi, err := os.Stat(big); err != nil || fi.Size() != 40<<20 {
		t.Fatalf("the earlier file after the refusal: %v %v", fi, err)
	}
	if got := hostMounts(t, filepath.Dir(ws)); len(got) != 0 {
		t.Fatalf("the refusal left mounts: %v", got)
	}
}
