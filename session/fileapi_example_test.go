package session_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"strings"

	"github.com/agentbox/agentbox/session"
)

// Files go in and out of a session as the sandbox user: several in one
// call, each with its own result; code finds them under /session.
func ExampleManager_WriteFiles() {
	ctx := context.Background()
	cfg, opts, cleanup := exampleSetup()
	defer cleanup()
	mgr, err := session.NewManager(ctx, cfg, opts...)
	if err != nil {
		log.Fatal(err)
	}
	defer mgr.Close(ctx)
	defer mgr.Stop(ctx, "thread-7")

	res, err := mgr.WriteFiles(ctx, "thread-7", []session.FileWrite{
		{Path: "/session/in/prices.csv", Data: strings.NewReader("item,price\ntea,3\ncake,5\n")},
		{Path: "in/run.sh", Mode: 0o755, Data: strings.NewReader("#!/bin/sh\necho hi\n")},
		{Path: "/etc/motd", Data: strings.NewReader("no")}, // outside what the sandbox may write
	})
	if err != nil {
		log.Fatal(err) // the call failed: engine, session, context
	}
	for _, r := range res {
		switch {
		case errors.Is(r.Err, fs.ErrPermission):
			fmt.Println(r.Path, "refused: permission denied")
		case r.Err != nil:
			fmt.Println(r.Path, r.Err)
		default:
			fmt.Println(r.Path, r.Size, "bytes")
		}
	}
	out, err := mgr.Exec(ctx, "thread-7", "import csv\nsum(int(r['price']) for r in csv.DictReader(open('/session/in/prices.csv')))")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("total:", out.Outputs[0].Data["text/plain"])

	r, err := mgr.ReadFile(ctx, "thread-7", "/session/in/prices.csv", 11, 5) // 5 bytes from byte 11
	if err != nil {
		log.Fatal(err)
	}
	part, _ := io.ReadAll(r)
	r.Close()
	fmt.Printf("%q of %d bytes\n", part, r.Info.Size)

	list, err := mgr.ListFiles(ctx, "thread-7", "/session/in", session.ListOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range list.Entries {
		fmt.Println(f.FileMode(), f.Size, f.Path)
	}
	// Output:
	// /session/in/prices.csv 24 bytes
	// /session/in/run.sh 18 bytes
	// /etc/motd refused: permission denied
	// total: 8
	// "tea,3" of 24 bytes
	// -rw-r--r-- 24 /session/in/prices.csv
	// -rwxr-xr-x 18 /session/in/run.sh
}
