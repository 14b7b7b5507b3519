package artifacts_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/internal/store"
)

// ExampleIndex_Add ingests one file: its content into the blobstore, then a row into
// the index, the order GC's safety rule relies on.
func ExampleIndex_Add() {
	dir, err := os.MkdirTemp("", "artifacts-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	s, err := store.Open(ctx, filepath.Join(dir, "agentbox.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	blobs := artifacts.NewBlobstore(filepath.Join(dir, "blobstore"))
	index := artifacts.NewIndex(s)

	content := "city,temp\nOslo,4\n"
	sha, size, err := blobs.Put(ctx, strings.NewReader(content))
	if err != nil {
		log.Fatal(err)
	}
	a, err := index.Add(ctx, artifacts.Artifact{
		Namespace: "team-a", SessionID: "analysis", SessionKey: "analysis",
		Name: "out/temps.csv", SHA256: sha, Size: size,
		MIME: artifacts.DetectMIME("out/temps.csv", []byte(content)),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(a.Name, a.Size, a.MIME)
	fmt.Println(a.SHA256)

	latest, err := index.Latest(ctx, "team-a", "analysis")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(latest["out/temps.csv"] == sha)
	// Output:
	// out/temps.csv 17 text/csv; charset=utf-8
	// b1b45bf8e96d0ef8cec561a867ff39c909cec489d40d86893c6a1cc10ee97869
	// true
}
