package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/agentbox/agentbox/artifacts"
	"github.com/agentbox/agentbox/config"
	"github.com/agentbox/agentbox/datasets"
	"github.com/agentbox/agentbox/internal/store"
)

// gc optionally forgets old artifacts, then removes the blobs no artifact
// refers to. It is safe while sessions ingest and the server serves: see
// Blobstore.GC.
func gc(ctx context.Context, cfg config.Config, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("artifact-server gc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	olderThan := fs.Duration("older-than", 0,
		"first forget artifacts created longer ago than this, such as 720h; 0s forgets every artifact (default: keep them all)")
	grace := fs.Duration("grace", artifacts.DefaultGrace,
		"spare blobs written more recently than this, which an ingestion may be about to index")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: artifact-server [flags] gc [gc flags]\n\n"+
			"Removes the blobs in BLOBSTORE_DIR that no artifact in ARTIFACTS_DB refers to.\n\ngc flags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "artifact-server: gc: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *olderThan < 0 || *grace <= 0 {
		fmt.Fprintln(stderr, "artifact-server: gc: -older-than must not be negative, and -grace must be positive")
		return exitUsage
	}

	db, err := store.Open(ctx, cfg.ArtifactsDB)
	if err != nil {
		fmt.Fprintf(stderr, "artifact-server: gc: %v\n", err)
		return exitProblem
	}
	defer db.Close()
	index := artifacts.NewIndex(db)
	// Given at all, even as 0s (everything created before now), the age
	// prunes; only leaving the flag out keeps every artifact.
	prune := false
	fs.Visit(func(f *flag.Flag) { prune = prune || f.Name == "older-than" })
	if prune {
		before := time.Now().Add(-*olderThan)
		n, err := index.Prune(ctx, before)
		if err != nil {
			fmt.Fprintf(stderr, "artifact-server: gc: %v\n", err)
			return exitProblem
		}
		fmt.Fprintf(stdout, "forgot %d artifacts created before %s\n", n, before.Format(time.RFC3339))
	} else {
		fmt.Fprintln(stdout, "kept every artifact (-older-than forgets old ones)")
	}
	blobs := artifacts.NewBlobstore(cfg.BlobstoreDir)
	blobs.Grace = *grace
	// The dataset cache keeps its blobs in the same store.
	cache := datasets.NewCache(blobs, db)
	defer cache.Close()
	n, err := blobs.GC(ctx, artifacts.AnyOf(index, cache))
	// GC goes on past a bad blob, so what it removed is worth saying
	// even when it reports errors.
	fmt.Fprintf(stdout, "removed %d unreferenced blobs from %s\n", n, cfg.BlobstoreDir)
	if err != nil {
		fmt.Fprintf(stderr, "artifact-server: gc: %v\n", err)
		return exitProblem
	}
	return exitOK
}
