package server_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/docker"
	"github.com/agentbox/agentbox/internal/dockertest"
)

// execdSrcEnv names the checkout BenchmarkExecdPeer builds OpenSandbox's
// execd from: the components/execd folder of OpenSandbox's repository,
// with components/internal beside it (its go.mod replaces a module by
// ../internal). Its source cannot be part of this repository.
const execdSrcEnv = "AGENTBOX_EXECD_SRC"

// BenchmarkExecdPeer compares serve's execd API with OpenSandbox's own
// execd binary, driven by the same client, interleaved (who goes first
// swaps every round): `true` through POST /command to its end event, and
// 1 KiB and 1 MiB through POST /files/upload and GET /files/download.
//
// execd is built from the checkout AGENTBOX_EXECD_SRC names (static,
// CGO_ENABLED=0, with the module proxy) and run as the sandbox user in a
// container of our image with a sandbox's limits (imagesetup.LockedDown:
// one CPU, its memory, pids, capabilities and seccomp), on the host's
// network so that both servers are reached over loopback: no bridge or NAT
// in execd's path that serve does not have. It runs with its defaults but
// for an access token, which serve's endpoints also carry.
//
// execd keeps a command's stream open for a second after its end event
// (its --graceful-shutdown-timeout): both streams are timed to that event
// and closed there, so both clients dial again for the next command.
// The floor is a fork and exec of `true` as the sandbox user, timed by
// the kernel in the sandbox's container (of the same image and limits).
func BenchmarkExecdPeer(b *testing.B) {
	src := os.Getenv(execdSrcEnv)
	if src == "" {
		b.Skipf("%s is not set: give it OpenSandbox's components/execd (git clone https://github.com/opensandbox-group/OpenSandbox; %s=$PWD/OpenSandbox/components/execd make bench) to compare serve's execd API with execd itself", execdSrcEnv, execdSrcEnv)
	}
	dockertest.Image(b)
	execd := startExecd(b, buildExecd(b, src))
	s := serveForBench(b)
	_, base, hdr := s.sandbox(b)
	ours := peer{base: base, hdr: hdr}
	client := &http.Client{}

	small, big := newUpload("/tmp/peer-1KiB", 1<<10), newUpload("/tmp/peer-1MiB", 1<<20)
	ops := []struct {
		name string
		do   func(peer)
	}{
		{"command", func(p peer) { p.stream(b, client, "/command", `{"command": "true"}`) }},
		{"upload1KiB", func(p peer) { p.upload(b, client, small) }},
		{"download1KiB", func(p peer) { p.download(b, client, small.path, small.size) }},
		{"upload1MiB", func(p peer) { p.upload(b, client, big) }},
		{"download1MiB", func(p peer) { p.download(b, client, big.path, big.size) }},
	}
	peers := [2]peer{ours, execd}
	samples := make([][2]dockertest.Samples, len(ops))
	var floor dockertest.Samples
	ours.stream(b, client, "/code", `{"code": `+strconv.Quote(dockertest.ForkTrue)+`, "context": {"language": "python"}}`)
	warm := dockertest.Rounds(5, 1) // dropped: the kernel, the files tool, the connections
	for i := 0; i < warm+dockertest.Rounds(100, 3); i++ {
		for j, op := range ops {
			for k := range 2 {
				who := (i + k) % 2
				start := time.Now()
				op.do(peers[who])
				if d := time.Since(start); i >= warm {
					samples[j][who] = append(samples[j][who], d)
				}
			}
		}
		out := ours.stream(b, client, "/code", `{"code": "print(_fork_true())", "context": {"language": "python"}}`)
		sec, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
		if err != nil {
			b.Fatalf("the in-container floor: %q", out)
		}
		if i >= warm {
			floor = append(floor, time.Duration(sec*float64(time.Second)))
		}
	}
	dockertest.Report(b, "forkTrue", "ms", floor, nil)
	for j, op := range ops {
		dockertest.Report(b, op.name+"Execd", "ms", samples[j][1], nil)
		dockertest.Report(b, op.name+"Agentbox", "ms", samples[j][0], samples[j][1])
	}
}

// buildExecd builds execd from src into a folder of its own, which it
// returns: a static binary, since it runs in our image.
func buildExecd(b *testing.B, src string) string {
	b.Helper()
	if _, err := os.Stat(filepath.Join(src, "main.go")); err != nil {
		b.Fatalf("%s=%s is not OpenSandbox's components/execd: %v", execdSrcEnv, src, err)
	}
	dir := b.TempDir()
	ctx, cancel := dockertest.Bound(b, 15*time.Minute) // the first build downloads its modules
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(dir, "execd"), ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build execd in %s: %v\n%s", src, err, out)
	}
	// The container runs it as the sandbox user, who must get in.
	if err := os.Chmod(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	return dir
}

// startExecd runs the execd in dir in a container of our image and waits
// until it answers.
func startExecd(b *testing.B, dir string) peer {
	b.Helper()
	cli := dockertest.Engine(b)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	token := hex.EncodeToString(tok[:])
	id := dockertest.Sandbox(b, func(s *docker.ContainerSpec) {
		s.User = "1000:1000" // the sandbox user, as commands run in a session
		s.NetworkMode = "host"
		s.Entrypoint = []string{"/opt/execd/execd"}
		s.Cmd = []string{"--port", strconv.Itoa(port)}
		s.Env = append(s.Env, "EXECD_ACCESS_TOKEN="+token, "HOME=/tmp")
		s.Mounts = append(s.Mounts, docker.Mount{Source: dir, Target: "/opt/execd", ReadOnly: true})
	})
	p := peer{base: "http://127.0.0.1:" + strconv.Itoa(port), hdr: map[string]string{"X-EXECD-ACCESS-TOKEN": token}}
	ctx, cancel := dockertest.Bound(b, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", p.base+"/ping", nil)
		p.set(req)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		st, ierr := cli.InspectContainer(ctx, id)
		if ierr != nil || !st.Running || ctx.Err() != nil {
			out, errOut, _ := cli.Logs(ctx, id)
			b.Fatalf("execd did not answer on %s (ping: %v; container: %+v %v)\nstdout: %s\nstderr: %s", p.base, err, st, ierr, out, errOut)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
}

// peer is an execd API: serve's for one sandbox, or execd's own.
type peer struct {
	base string
	hdr  map[string]string
}

func (p peer) set(req *http.Request) {
	for k, v := range p.hdr {
		req.Header.Set(k, v)
	}
}

// stream POSTs body to the peer's route (/command, /code) and reads the
// event stream to its end event, then closes it: execd keeps it open a
// second longer. It returns the stdout the stream carried.
func (p peer) stream(b *testing.B, client *http.Client, route, body string) string {
	req, _ := http.NewRequest("POST", p.base+route, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	p.set(req)
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		b.Fatalf("POST %s: %d %s", req.URL, resp.StatusCode, data)
	}
	var out strings.Builder
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadBytes('\n')
		if line = bytes.TrimSpace(bytes.TrimPrefix(line, []byte("data:"))); len(line) > 0 {
			var ev struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if jerr := json.Unmarshal(line, &ev); jerr != nil {
				b.Fatalf("POST %s: event %q: %v", req.URL, line, jerr)
			}
			switch ev.Type {
			case "stdout":
				out.WriteString(ev.Text)
			case "error":
				b.Fatalf("POST %s: %s", req.URL, line)
			case "execution_complete":
				return out.String()
			}
		}
		if err != nil {
			b.Fatalf("POST %s: the stream ended without its end event: %v", req.URL, err)
		}
	}
}

// upload is a multipart body of one file, as the OpenSandbox SDK sends
// it: a metadata part, then the file part.
type upload struct {
	path, contentType string
	body              []byte
	size              int
}

func newUpload(path string, size int) upload {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="metadata"; filename="metadata"`)
	h.Set("Content-Type", "application/json")
	w, _ := mw.CreatePart(h)
	fmt.Fprintf(w, `{"path": %q, "mode": 644}`, path)
	w, _ = mw.CreateFormFile("file", filepath.Base(path))
	w.Write(bytes.Repeat([]byte("x"), size))
	mw.Close()
	return upload{path: path, contentType: mw.FormDataContentType(), body: body.Bytes(), size: size}
}

// upload POSTs u to the peer's /files/upload.
func (p peer) upload(b *testing.B, client *http.Client, u upload) {
	req, _ := http.NewRequest("POST", p.base+"/files/upload", bytes.NewReader(u.body))
	req.Header.Set("Content-Type", u.contentType)
	p.set(req)
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("POST %s: %d %s", req.URL, resp.StatusCode, got)
	}
}

// download reads path whole and checks its size.
func (p peer) download(b *testing.B, client *http.Client, path string, size int) {
	req, _ := http.NewRequest("GET", p.base+"/files/download?path="+url.QueryEscape(path), nil)
	p.set(req)
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || len(got) != size {
		b.Fatalf("GET %s: %d, %d bytes (want %d), %v", req.URL, resp.StatusCode, len(got), size, err)
	}
}
