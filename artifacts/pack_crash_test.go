package artifacts_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/artifacts"
)

const packCrashEnv = "AGENTBOX_PACK_CRASH_DIR"

// TestPackCrashHelperProcess is not a test: it is the body of the processes
// TestPackKilled kills. It commits PackSmall batches into the blobstore until
// killed, printing each blob's name once its Commit returned.
func TestPackCrashHelperProcess(t *testing.T) {
	dir := os.Getenv(packCrashEnv)
	if dir == "" {
		t.Skip("helper process only")
	}
	bs := artifacts.NewBlobstore(dir)
	ctx := context.Background()
	go bs.Flush(ctx) // what the manager's first sweep does: place what a crash left
	for i := 0; ; i++ {
		bt := bs.NewBatch(artifacts.PackSmall())
		var sums []string
		for j := range 40 {
			size := 1 + j*97
			if j == 0 && i%3 == 0 {
				size = 100 << 10 // one file of its own now and then
			}
			c := make([]byte, size)
			rand.Read(c)
			sum, _, err := bt.Put(ctx, bytes.NewReader(c), 0)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			sums = append(sums, sum)
		}
		if err := bt.Commit(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("COMMITTED %s\n", strings.Join(sums, " "))
	}
}

// everything is a Referencer for which every blob is referenced.
type everything struct{}

func (everything) Referenced(context.Context, string) (bool, error) { return true, nil }

// TestPackKilled kills processes storing packed batches at random moments,
// three times over one blobstore, and checks what a crash of the process
// may leave: every final name holds exactly its content, every blob whose
// Commit returned can be opened (from its file or its pack), a Flush places
// every pending pack, and GC clears the temp files.
func TestPackKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var committed []string
	for round := range 3 {
		c := exec.Command(exe, "-test.run=^TestPackCrashHelperProcess$", "-test.count=1")
		c.Env = append(os.Environ(), packCrashEnv+"="+dir)
		var stderr bytes.Buffer
		c.Stderr = &stderr
		out, err := c.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		lines.Buffer(nil, 1<<20)
		batches := 0
		want := 5 + round*7 // kill at a different point each round
		for batches < want && lines.Scan() {
			if sums, ok := strings.CutPrefix(lines.Text(), "COMMITTED "); ok {
				committed = append(committed, strings.Fields(sums)...)
				batches++
			}
		}
		c.Process.Kill()
		io.Copy(io.Discard, out)
		c.Wait()
		if batches < want {
			t.Fatalf("round %d: helper stopped after %d batches: %s", round, batches, stderr.String())
		}
	}

	// Whatever the kills interrupted, a final name holds its content.
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if strings.HasPrefix(rel, "tmp"+string(filepath.Separator)) || strings.HasPrefix(rel, "pending"+string(filepath.Separator)) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != filepath.Base(p) {
			t.Errorf("%s holds other content", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	bs := artifacts.NewBlobstore(dir)
	check := func(when string) {
		for _, sum := range committed {
			r, err := bs.Open(sum)
			if err != nil {
				t.Fatalf("%s: committed blob %s: %v", when, sum, err)
			}
			h := sha256.New()
			_, err = io.Copy(h, r)
			r.Close()
			if err != nil || hex.EncodeToString(h.Sum(nil)) != sum {
				t.Fatalf("%s: committed blob %s reads wrong: %v", when, sum, err)
			}
		}
	}
	check("after the kills")
	if err := bs.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "pending")); len(left) != 0 {
		t.Errorf("pending after Flush: %d packs", len(left))
	}
	for _, sum := range committed {
		if p, _ := bs.Path(sum); !fileExists(p) {
			t.Fatalf("committed blob %s not placed by Flush", sum)
		}
	}
	check("after Flush")
	bs.Grace = time.Nanosecond
	if _, err := bs.GC(t.Context(), everything{}); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(left) != 0 {
		t.Errorf("tmp after GC: %d files", len(left))
	}
	t.Logf("%d blobs committed across 3 killed processes", len(committed))
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
