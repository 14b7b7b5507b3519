package main

import "time"

// The README's performance tables. Benchmarks that start containers run a
// fixed number of rounds and report their own medians, p90s and ratios
// (dockertest.Report): their tables run with -benchtime 1x. Benchmarks of
// pure code honour b.N and run for a time.

// Tables returns every table, in the README's order.
func Tables() []Table {
	// med, p90 and ratio format a dockertest.Report metric triple.
	med := func(g *Get, bench, name, unit string) string { return dur(unit, g.V(bench, name+"-med-"+unit)) }
	p90 := func(g *Get, bench, name, unit string) string { return dur(unit, g.V(bench, name+"-p90-"+unit)) }
	ratio := func(g *Get, bench, name string) string { return Ratio(g.V(bench, name+"/floor")) }
	triple := func(bench, name, unit string) func(*Get) []string {
		return func(g *Get) []string {
			return []string{med(g, bench, name, unit), p90(g, bench, name, unit), ratio(g, bench, name)}
		}
	}
	floor := func(bench, name, unit string) func(*Get) []string {
		return func(g *Get) []string {
			return []string{med(g, bench, name, unit), p90(g, bench, name, unit), "1×"}
		}
	}
	return []Table{
		{
			Name: "kernel", Packages: []string{"./kernel"},
			Bench: "^Benchmark(RoundTrip|Output1MiB)$", Benchtime: "1x",
			Header: []string{"what", "median", "p90", "vs floor"},
			Rows: []Row{
				{What: "floor: Python echo over `docker exec -i`", Cells: floor("kernel.RoundTrip", "floor", "µs")},
				{What: "`pass` through the kernel", Cells: triple("kernel.RoundTrip", "pass", "µs")},
				{What: "`x = x + 1`", Cells: triple("kernel.RoundTrip", "incr", "µs")},
				{What: "trailing expression", Cells: triple("kernel.RoundTrip", "expr", "µs")},
				{What: "1 MiB of stdout", Cells: func(g *Get) []string {
					const b = "kernel.Output1MiB"
					return []string{med(g, b, "out1MiB", "µs"), p90(g, b, "out1MiB", "µs"),
						ratio(g, b, "out1MiB") + " (floor: the same MiB echoed, " + med(g, b, "floor1MiB", "µs") + ")"}
				}},
			},
		},
		{
			Name: "image", Packages: []string{"./cmd/sandbox-setup"},
			Bench: "^BenchmarkSetup$", Benchtime: "1x",
			Header: []string{"what", "median", "p90"},
			Rows: []Row{
				{What: "`sandbox-setup` when the image is current (in process: the check, nothing built)", Cells: func(g *Get) []string {
					const b = "sandbox-setup.Setup/current"
					return []string{med(g, b, "current", "ms"), p90(g, b, "current", "ms")}
				}},
				{What: "sandbox image from nothing (debootstrap + build)", Optional: "AGENTBOX_BENCH_IMAGE_FROM_NOTHING", Cells: func(g *Get) []string {
					return []string{Sec(g.V("sandbox-setup.Setup/from-nothing", "from-nothing-s")), ""}
				}},
			},
		},
		{
			Name: "sessions", Packages: []string{"./session"},
			Bench: "^Benchmark(ColdStart|WarmAcquire|ExecRoundTrip|ShellRoundTrip|IdleMemory|FiftySessions)$", Benchtime: "1x",
			Header: []string{"what", "median", "p90", "ratio"},
			Rows: []Row{
				{What: "floor: create + start of a container running `python3 -c pass`", Cells: floor("session.ColdStart", "floor", "ms")},
				{What: "cold start: new key to its first result", Cells: func(g *Get) []string {
					c := triple("session.ColdStart", "cold", "ms")(g)
					return []string{c[0], c[1], c[2] + " the floor"}
				}},
				{What: "warm pool: new key to its first result (`POOL_SIZE=1`)", Cells: func(g *Get) []string {
					const b = "session.WarmAcquire"
					return []string{med(g, b, "warm", "ms"), p90(g, b, "warm", "ms"),
						Ratio(g.V(b, "cold/warm")) + " faster than cold (" + med(g, b, "cold", "ms") + " in the same run)"}
				}},
				{What: "`pass` through the Manager vs the same kernel's own client", Cells: func(g *Get) []string {
					const b = "session.ExecRoundTrip"
					return []string{med(g, b, "manager", "ms") + " vs " + med(g, b, "kernel", "ms"),
						p90(g, b, "manager", "ms") + " vs " + p90(g, b, "kernel", "ms"), ratio(g, b, "manager")}
				}},
				{What: "shell command `true` (`Manager.Run`) vs a fork and exec of `true` timed in the same container", Cells: func(g *Get) []string {
					const b = "session.ShellRoundTrip"
					return []string{med(g, b, "run", "ms") + " vs " + med(g, b, "in-container", "ms"),
						p90(g, b, "run", "ms") + " vs " + p90(g, b, "in-container", "ms"),
						ratio(g, b, "run") + " (" + Ratio(g.V(b, "run/engine-exec")) + " the engine's own exec of `true`, " + med(g, b, "engine-exec", "ms") +
							"; " + Ratio(g.V(b, "run/docker-exec-cli")) + " `docker exec ID true` from the CLI, " + med(g, b, "docker-exec-cli", "ms") + ")"}
				}},
				{What: "idle session, nothing imported", Cells: func(g *Get) []string {
					return []string{MiB(g.V("session.IdleMemory", "idle-MiB")), "", ""}
				}},
				{What: "50 new sessions at once, each `sum(range(10**6))`", Cells: func(g *Get) []string {
					const b = "session.FiftySessions"
					return []string{Sec(g.V(b, "total-s")) + " total", "", Rate(g.V(b, "errors"), "errors")}
				}},
			},
		},
		{
			Name: "runtimes", Packages: []string{"./kernel", "./session"}, Runtime: "runsc",
			Bench: "^Benchmark(RoundTripRuntimes|ColdStartRuntimes)$", Benchtime: "1x",
			Header: []string{"what", "runc", "runsc (gVisor)", "runsc / runc"},
			Rows: []Row{
				{What: "floor: Python echo over `docker exec -i`", Cells: func(g *Get) []string {
					const b = "kernel.RoundTripRuntimes"
					return []string{med(g, b, "floor", "µs"), med(g, b, "floorRunsc", "µs"), ratio(g, b, "floorRunsc")}
				}},
				{What: "`pass` through the kernel", Cells: func(g *Get) []string {
					const b = "kernel.RoundTripRuntimes"
					return []string{med(g, b, "runc", "µs") + " (" + ratio(g, b, "runc") + " its floor)",
						med(g, b, "runsc", "µs") + " (" + ratio(g, b, "runsc") + " runc's floor)", Ratio(g.V(b, "runsc/runc"))}
				}},
				{What: "floor: create + start a container running `python3 -c pass`", Cells: func(g *Get) []string {
					const b = "session.ColdStartRuntimes"
					return []string{med(g, b, "floor", "ms"), med(g, b, "floorRunsc", "ms"), ratio(g, b, "floorRunsc")}
				}},
				{What: "cold start: new key to its first result", Cells: func(g *Get) []string {
					const b = "session.ColdStartRuntimes"
					return []string{med(g, b, "runc", "ms") + " (" + ratio(g, b, "runc") + " its floor)",
						med(g, b, "runsc", "ms") + " (" + ratio(g, b, "runsc") + " runc's floor)", Ratio(g.V(b, "runsc/runc"))}
				}},
			},
		},
		{
			Name: "serve", Packages: []string{"./server"},
			Bench: "^BenchmarkServe", Benchtime: "1x",
			Header: []string{"what", "library", "served (execd, as the OpenSandbox SDK calls it)", "ratio"},
			Rows: []Row{
				{What: "`pass` (`Manager.Exec` vs `POST /code`, streamed)", Cells: func(g *Get) []string {
					const b = "server.ServeRoundTrip"
					return []string{med(g, b, "execLibrary", "ms"), med(g, b, "execServed", "ms"), ratio(g, b, "execServed")}
				}},
				{What: "`true` (`Manager.Run` vs `POST /command`, streamed)", Cells: func(g *Get) []string {
					const b = "server.ServeRoundTrip"
					return []string{med(g, b, "commandLibrary", "ms"), med(g, b, "commandServed", "ms"), ratio(g, b, "commandServed")}
				}},
				{What: "10 sessions at once, `pass` in a loop each", Cells: func(g *Get) []string {
					const b = "server.ServeConcurrentSessions"
					return []string{Rate(g.V(b, "library-req/s"), "req/s"), Rate(g.V(b, "served-req/s"), "req/s"), Ratio(g.V(b, "served/library"))}
				}},
			},
		},
		{
			Name: "execd", Packages: []string{"./server"},
			Bench: "^BenchmarkExecdPeer$", Benchtime: "1x",
			Needs:  Need{Env: "AGENTBOX_EXECD_SRC", What: "a checkout of OpenSandbox's components/execd to build execd from"},
			Header: []string{"what", "agentbox serve", "OpenSandbox execd", "agentbox / execd"},
			Rows: []Row{
				{What: "`true` (`POST /command`, to its end event)", Cells: func(g *Get) []string {
					c := peer("command")(g)
					return []string{c[0], c[1], c[2] + " (a fork and exec of `true` in the container: " + med(g, "server.ExecdPeer", "forkTrue", "ms") + ")"}
				}},
				{What: "upload 1 KiB (`POST /files/upload`)", Cells: peer("upload1KiB")},
				{What: "download 1 KiB (`GET /files/download`)", Cells: peer("download1KiB")},
				{What: "upload 1 MiB", Cells: peer("upload1MiB")},
				{What: "download 1 MiB", Cells: peer("download1MiB")},
			},
		},
		{
			Name: "artifacts", Packages: []string{"./session", "./kernel"},
			Bench: "^Benchmark(Ingest|DatasetStage|Scan)$", Benchtime: "1x",
			Header: []string{"what", "time", "ratio"},
			Rows: []Row{
				{What: "ingest 1 file of 256 MiB through a session (TMPFS) vs `sha256sum`", Cells: func(g *Get) []string {
					const b = "session.Ingest"
					return []string{Ms(g.V(b, "big-ingest-ms")) + " vs " + Ms(g.V(b, "big-sha256sum-ms")), Ratio(g.V(b, "big/sha256sum"))}
				}},
				{What: "ingest 1 000 files of 4 KiB through a session vs `sha256sum` (median of 7 paired rounds)", Cells: func(g *Get) []string {
					const b = "session.Ingest"
					return []string{Ms(g.V(b, "small-ingest-ms")) + " vs " + Ms(g.V(b, "small-sha256sum-ms")), Ratio(g.V(b, "small/sha256sum")) + " (goal 1.5×)"}
				}},
				{What: "`pass` listing 1 000 files into its result vs `pass` alone (`BenchmarkScan`)", Cells: func(g *Get) []string {
					const b = "kernel.Scan"
					return []string{med(g, b, "scan", "µs") + " vs " + med(g, b, "plain", "µs"), ratio(g, b, "scan")}
				}},
				{What: "stage a Parquet dataset of about 100 MiB from an API source vs copying it in through the engine", Cells: func(g *Get) []string {
					const b = "session.DatasetStage"
					return []string{med(g, b, "fetch+stage", "ms") + " vs " + med(g, b, "floor", "ms") + " (" + MiB(g.V(b, "MiB")) + ")", ratio(g, b, "fetch+stage")}
				}},
				{What: "stage it into a second session from the cache (no fetch)", Cells: func(g *Get) []string {
					const b = "session.DatasetStage"
					return []string{med(g, b, "cachehit", "ms"), ratio(g, b, "cachehit")}
				}},
			},
		},
		{
			Name: "store", Packages: []string{"./artifacts", "./datasets"},
			Bench: "^Benchmark(Ingest|Download|DescribeDir)$", Benchtime: "2s",
			Header: []string{"what", "figure", "ratio"},
			Rows: []Row{
				{What: "blobstore alone, 1 file of 256 MiB (`Put`) vs `sha256sum`", Cells: func(g *Get) []string {
					const b = "artifacts.Ingest"
					return []string{Rate(g.V(b, "big-MiB/s"), "MiB/s"), Ratio(g.V(b, "big/sha256sum"))}
				}},
				{What: "blobstore alone, 1 000 × 4 KiB in one `PackSmall` Batch vs `sha256sum`", Cells: func(g *Get) []string {
					const b = "artifacts.Ingest"
					return []string{Rate(g.V(b, "pack-files/s"), "files/s"),
						Ratio(g.V(b, "pack/sha256sum")) + " (one file each, in a Batch: " + Ratio(g.V(b, "batch/sha256sum")) + "; by Put: " + Ratio(g.V(b, "put/sha256sum")) + ")"}
				}},
				{What: "download a 4 KiB artifact, token verified, 8 clients on loopback", Cells: func(g *Get) []string {
					return []string{Rate(g.V("artifacts.Download/4KiB-sqlite", "req/s"), "req/s") + " (SQLite index; " +
						Rate(g.V("artifacts.Download/4KiB", "req/s"), "req/s") + " with an in-memory index)", "goal 5 000"}
				}},
				{What: "download a 256 MiB artifact", Cells: func(g *Get) []string {
					return []string{Rate(g.V("artifacts.Download/256MiB", "MiB/s"), "MiB/s"), ""}
				}},
				{What: "describe 100 Parquet files (schemas from footers)", Cells: func(g *Get) []string {
					return []string{Dur(nsop(g, "datasets.DescribeDir/rowgroups=1")) + " (100 row groups each: " + Dur(nsop(g, "datasets.DescribeDir/rowgroups=100")) + ")", ""}
				}},
			},
		},
		{
			Name: "files", Packages: []string{"./session"},
			Bench: "^BenchmarkFile", Benchtime: "1x",
			Header: []string{"what", "median", "p90", "vs floor"},
			Rows: []Row{
				{What: "write 1 KiB (`WriteFile`)", Cells: triple("session.FileWrite/1KiB", "write", "ms")},
				{What: "write 1 MiB", Cells: triple("session.FileWrite/1MiB", "write", "ms")},
				{What: "write 500 MiB", Cells: throughput("session.FileWrite/500MiB", "write")},
				{What: "580 files of 1–16 KiB (4.6 MiB) in one `WriteFiles` call", Cells: triple("session.FileWriteMany", "write580", "ms")},
				{What: "read 1 KiB (`ReadFile`, to the end)", Cells: triple("session.FileRead/1KiB", "read", "ms")},
				{What: "read 1 MiB", Cells: triple("session.FileRead/1MiB", "read", "ms")},
				{What: "read 500 MiB", Cells: throughput("session.FileRead/500MiB", "read")},
			},
		},
		{
			Name: "tracing", Packages: []string{"./session"},
			Bench: "^BenchmarkTracingOverhead$", Benchtime: "1x",
			Header: []string{"provider", "median", "p90", "vs the kernel's own client", "vs no provider"},
			Rows: []Row{
				{What: "the kernel's own client, same session (the floor)", Cells: func(g *Get) []string {
					c := floor("session.TracingOverhead", "kernel", "ms")(g)
					return append(c, "")
				}},
				{What: "none (the default)", Cells: func(g *Get) []string {
					return append(triple("session.TracingOverhead", "none", "ms")(g), "1×")
				}},
				{What: "SDK, a processor that drops every span", Cells: func(g *Get) []string {
					return append(triple("session.TracingOverhead", "drop", "ms")(g), Ratio(g.V("session.TracingOverhead", "drop/none")))
				}},
				{What: "SDK, batch processor, exporter that discards", Cells: func(g *Get) []string {
					return append(triple("session.TracingOverhead", "batch", "ms")(g), Ratio(g.V("session.TracingOverhead", "batch/none")))
				}},
			},
		},
		{
			Name: "pause", Packages: []string{"./session"},
			Bench: "^BenchmarkPauseResume$", Benchtime: "1x",
			Header: []string{"what", "median", "p90", "vs floor"},
			Rows: []Row{
				{What: "floor: the engine's own pause of a bare sandbox container", Cells: floor("session.PauseResume", "pause-floor", "ms")},
				{What: "`Manager.Pause`", Cells: triple("session.PauseResume", "pause", "ms")},
				{What: "floor: the engine's own unpause", Cells: floor("session.PauseResume", "resume-floor", "ms")},
				{What: "`Manager.Resume`", Cells: triple("session.PauseResume", "resume", "ms")},
			},
		},
	}
}

// nsop is a benchmark's ns/op.
func nsop(g *Get, bench string) time.Duration { return time.Duration(g.V(bench, "ns/op")) }

// dur formats a metric in unit ("µs" or "ms").
func dur(unit string, v float64) string {
	if unit == "µs" {
		return Us(v)
	}
	return Ms(v)
}

// peer is an execd row: serve's median, execd's, and their ratio
// (BenchmarkExecdPeer reports execd as the floor).
func peer(op string) func(*Get) []string {
	return func(g *Get) []string {
		const b = "server.ExecdPeer"
		return []string{Ms(g.V(b, op+"Agentbox-med-ms")), Ms(g.V(b, op+"Execd-med-ms")), Ratio(g.V(b, op+"Agentbox/floor"))}
	}
}

// throughput is a files row with the rate after the median.
func throughput(bench, name string) func(*Get) []string {
	return func(g *Get) []string {
		return []string{Ms(g.V(bench, name+"-med-ms")) + " (" + Rate(g.V(bench, name+"-MiB/s"), "MiB/s") + ")",
			Ms(g.V(bench, name+"-p90-ms")), Ratio(g.V(bench, name+"/floor"))}
	}
}
