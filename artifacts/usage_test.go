package artifacts_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/artifacts"
)

// TestBytesByKeyPrefix sums the sizes of the rows whose session key starts
// with a prefix, in one namespace: what a tenant's artifacts take. A key
// with LIKE's wildcards in it matches only itself.
func TestBytesByKeyPrefix(t *testing.T) {
	ix := artifacts.NewIndex(openStore(t))
	add := func(ns, key, name string, size int64) {
		t.Helper()
		_, err := ix.Add(t.Context(), artifacts.Artifact{Namespace: ns, SessionID: "id-" + strings.NewReplacer("/", "-", "%", "p", "_", "u").Replace(key),
			SessionKey: key, Name: name, SHA256: strings.Repeat("a", 64), Size: size})
		if err != nil {
			t.Fatal(err)
		}
	}
	add("ns", "tA/one", "a.txt", 100)
	add("ns", "tA/one", "b.txt", 20)
	add("ns", "tA/two", "a.txt", 3)
	add("ns", "tB/one", "a.txt", 5000)
	add("other", "tA/one", "a.txt", 7000)
	add("ns", "tA%/x", "a.txt", 40000)
	add("ns", "t_/x", "a.txt", 500000)
	add("ns", "tÄ/x", "a.txt", 6000000)
	for _, tt := range []struct {
		prefix string
		want   int64
	}{
		{"tA/", 123},
		{"tB/", 5000},
		{"tC/", 0},
		{"tA%/", 40000},
		{"t_/", 500000},
		{"tÄ/", 6000000},
		{"", 6545123},
	} {
		got, err := ix.BytesByKeyPrefix(t.Context(), "ns", tt.prefix)
		if err != nil || got != tt.want {
			t.Errorf("BytesByKeyPrefix(ns, %q) = %d, %v; want %d", tt.prefix, got, err, tt.want)
		}
	}
}

// BenchmarkBytesByKeyPrefix prices what a tenant's artifact quota costs
// when its cached sum is stale: one sum over an index of 20 000 rows of
// 20 tenants.
func BenchmarkBytesByKeyPrefix(b *testing.B) {
	ix := artifacts.NewIndex(openStore(b))
	list := make([]artifacts.Artifact, 0, 20000)
	for i := range 20000 {
		key := fmt.Sprintf("t%02d/s%d", i%20, i%200)
		list = append(list, artifacts.Artifact{Namespace: "ns", SessionID: fmt.Sprintf("id%d", i%200), SessionKey: key,
			Name: fmt.Sprintf("f%d", i), SHA256: strings.Repeat("c", 64), Size: 1000})
	}
	if _, err := ix.AddAll(b.Context(), list); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if n, err := ix.BytesByKeyPrefix(b.Context(), "ns", "t07/"); err != nil || n != 1000*1000 {
			b.Fatalf("%d, %v", n, err)
		}
	}
}
