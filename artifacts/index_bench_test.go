package artifacts_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/agentbox/agentbox/artifacts"
)

// BenchmarkAddAll records 1 000 artifacts of one session per op, as an
// execution that made a thousand files does.
func BenchmarkAddAll(b *testing.B) {
	ix := artifacts.NewIndex(openStore(b))
	n := 0
	for b.Loop() {
		rows := make([]artifacts.Artifact, 1000)
		for i := range rows {
			var buf [8]byte
			rand.Read(buf[:])
			s := sha256.Sum256(buf[:])
			n++
			rows[i] = artifacts.Artifact{Namespace: "ns", SessionID: "s1", Name: fmt.Sprintf("dir/f%06d.bin", n), SHA256: hex.EncodeToString(s[:]), Size: 4096, MIME: "application/octet-stream"}
		}
		if _, err := ix.AddAll(b.Context(), rows); err != nil {
			b.Fatal(err)
		}
	}
}
