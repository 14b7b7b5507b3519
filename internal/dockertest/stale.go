package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"testing"
	"time"

	"github.com/agentbox/agentbox/kernel"
	sandboximage "github.com/agentbox/agentbox/sandbox-image"
)

// StaleImage imports a one-file root filesystem as a new image in repository
// prefix, labelled like a sandbox image built from other sources, and removes
// it when the test ends. It returns the tag.
func StaleImage(t testing.TB, prefix string) string {
	t.Helper()
	return importImage(t, prefix,
		"LABEL "+sandboximage.LabelSourceHash+"=0000",
		"LABEL "+sandboximage.LabelProtocol+"="+strconv.Itoa(kernel.ProtocolVersion))
}

// ForeignImage is StaleImage without agentbox's labels: an image that is
// no sandbox image at all, as debian:bookworm is, made without a pull.
func ForeignImage(t testing.TB, prefix string) string {
	t.Helper()
	return importImage(t, prefix)
}

// importImage imports a one-file image tagged in repository prefix with
// the Dockerfile changes given, removed when the test ends.
func importImage(t testing.TB, prefix string, changes ...string) string {
	t.Helper()
	cli := Engine(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := []byte("agentbox test image\n")
	if err := tw.WriteHeader(&tar.Header{Name: "README", Mode: 0o644, Size: int64(len(body)), ModTime: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tag := prefix + ":" + hex.EncodeToString(rnd[:])
	err := cli.ImportImage(ctx, &buf, tag, changes)
	if err != nil {
		t.Fatalf("import test image: %v", err)
	}
	img, err := cli.InspectImage(ctx, tag)
	if err != nil {
		t.Fatalf("inspect test image: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// The tag first (a test may have rebuilt it: removing the tag then
		// only untags), then the imported image itself by its ID.
		if err := cli.RemoveImage(ctx, tag); err != nil {
			t.Errorf("remove %s: %v", tag, err)
		}
		if err := cli.RemoveImage(ctx, img.ID); err != nil {
			t.Errorf("remove %s (%s): %v", tag, img.ID, err)
		}
	})
	return tag
}
