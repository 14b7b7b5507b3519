// Package seccompgen derives agentbox's seccomp profile
// (sandbox-image/seccomp.json) from the Moby project's default profile (the
// one Docker applies when a container asks for none), by taking out the
// syscalls in Removals and nothing else. The rest of the upstream file
// (architectures, argument filters, capability and kernel conditions,
// comments) is kept byte for byte, so a diff against upstream shows only the
// removals.
//
// The upstream file is read from the Go module cache
// (UpstreamModule@UpstreamVersion, default.json); that module is never a
// dependency of agentbox. The program in genprofile writes seccomp.json
// (`go generate ./sandbox-image`), and a test checks that it reproduces the
// committed file.
//
// The upstream profile is Copyright The Moby Authors, Apache License 2.0,
// the licence of agentbox too.
package seccompgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
)

// The upstream profile: Moby's profiles/seccomp module, version pinned so
// that a regeneration is reproducible; raising it is a reviewed change.
const (
	UpstreamModule  = "github.com/moby/profiles/seccomp"
	UpstreamVersion = "v0.3.0"
	UpstreamFile    = "default.json"
)

// UpstreamPath is where the upstream profile lies in the module cache
// modcache (`go env GOMODCACHE`). The module path has no upper-case letters,
// so it needs no case escaping.
func UpstreamPath(modcache string) string {
	return filepath.Join(modcache, filepath.FromSlash(UpstreamModule)+"@"+UpstreamVersion, UpstreamFile)
}

// Removal is a group of syscalls taken out of the profile, and why.
type Removal struct {
	Names []string
	Why   string
}

// Removals lists every syscall agentbox's profile denies on top of the
// engine's default, the one place that list lives. None of them is used by
// a Python cell (the image's numpy, pandas, pyarrow, matplotlib, scipy and
// scikit-learn, threads, fork, subprocesses, multiprocessing, asyncio) or by
// the init (setresuid, setgroups, prctl, capset, fork and exec, signals,
// pipes, Unix sockets with SCM_RIGHTS and SO_PEERCRED), and each one opens
// kernel code that has been a way out of containers or a way to root.
//
// Some are already absent from the upstream profile, or allowed there only
// with a capability sessions never have; they are listed all the same, so
// that neither an upstream change nor a capability added later can bring
// one back without a test failing.
//
// Considered and kept: clone3 (upstream answers ENOSYS so glibc falls back
// to clone; keep that), pidfd_open and pidfd_send_signal (subprocess and
// asyncio use them), memfd_create, splice and tee (in Python's os module),
// seccomp and the landlock calls (a process restricting itself is welcome),
// the legacy AIO calls (io_setup and friends; old, simple, no known need to
// remove them), and the NUMA calls (upstream already requires CAP_SYS_NICE).
var Removals = []Removal{
	{[]string{"io_uring_setup", "io_uring_enter", "io_uring_register"},
		"io_uring is a second way into most of the kernel, and has been the source of a large share of " +
			"Linux privilege escalations (Google reported 60% of its 2022 kernel exploit bounty submissions " +
			"used it, and turned it off on ChromeOS, for Android apps and on its servers). Docker 20.10's " +
			"default profile allows it; newer Moby profiles do not. CPython and the image's libraries never use it."},
	{[]string{"userfaultfd"},
		"lets a process stop the kernel on a page fault for as long as it likes, the usual way to win " +
			"kernel race conditions in exploits; used by live migration and a few garbage collectors, never by Python."},
	{[]string{"perf_event_open"},
		"performance counters: a large subsystem with a long list of bugs, and a side channel into other " +
			"processes; upstream allows it only with CAP_PERFMON or CAP_SYS_ADMIN."},
	{[]string{"bpf"},
		"loads eBPF programs into the kernel, whose verifier is a frequent source of privilege escalations; " +
			"upstream allows it only with CAP_BPF or CAP_SYS_ADMIN."},
	{[]string{"keyctl", "add_key", "request_key"},
		"the kernel keyring is not namespaced, so keys could pass between containers of one user, and it " +
			"has had exploitable bugs (CVE-2016-0728); already absent upstream."},
	{[]string{"ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp", "pidfd_getfd"},
		"read, write, advise or compare another process's memory and files, or take its file descriptors: " +
			"a cell runs no debugger. Separate uids already keep user code away from the init; this adds a " +
			"second wall, and keeps processes of one cell from each other (upstream allows ptrace and " +
			"process_vm_* on kernels from 4.8, the rest only with CAP_SYS_PTRACE)."},
	{[]string{"fanotify_init", "fanotify_mark"},
		"filesystem-wide event monitoring, which since Linux 5.13 unprivileged processes may partly use; " +
			"nothing in a cell watches files that way (upstream allows fanotify_init only with CAP_SYS_ADMIN)."},
	{[]string{"open_by_handle_at", "name_to_handle_at"},
		"file handles open files without a path, around the checks a path walk makes: open_by_handle_at " +
			"was the 2014 \"shocker\" container escape (upstream requires CAP_DAC_READ_SEARCH), and " +
			"name_to_handle_at hands out the handles and mount ids it needs (Docker 20.10 denied it; newer " +
			"Moby profiles allow it)."},
	{[]string{"modify_ldt"},
		"x86 local descriptor tables, for 16-bit code and Wine; a history of kernel bugs (CVE-2015-3290, " +
			"CVE-2017-17053) made Linux let distributions build without it."},
	{[]string{"vmsplice"},
		"maps user pages into a pipe, the building block of copy-on-write attacks such as CVE-2020-29374 " +
			"(and, in 2008, CVE-2008-0600); Python's os module has splice but no vmsplice."},
}

// Denied returns the names in Removals, in order.
func Denied() []string {
	var out []string
	for _, r := range Removals {
		out = append(out, r.Names...)
	}
	return out
}

// denying are the actions that refuse a call; a name in a rule with any
// other action (SCMP_ACT_ALLOW, _LOG, _TRACE, _NOTIFY) is let through.
var denying = []string{"SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_TRAP"}

// Derive returns the profile: upstream, a seccomp profile in Docker's JSON
// format, without the names in Removals in any rule that lets a call
// through; a rule left with no name is dropped. It also returns the names it
// took out (those upstream let through in some rule). The output is indented
// with tabs, as upstream is, and ends in a newline.
//
// Derive refuses a profile whose default action would not refuse what it
// removes (it must be SCMP_ACT_ERRNO with EPERM or ENOSYS), and one with
// rules it cannot read: better to stop than to write a profile that allows
// what it should not.
func Derive(upstream []byte) (profile []byte, removed []string, err error) {
	var top object
	if err := json.Unmarshal(upstream, &top); err != nil {
		return nil, nil, fmt.Errorf("upstream profile: %w", err)
	}
	var action string
	if err := top.get("defaultAction", &action); err != nil {
		return nil, nil, fmt.Errorf("upstream profile: defaultAction: %w", err)
	}
	errno := uint64(1) // EPERM, libseccomp's and Docker's default
	if top.has("defaultErrnoRet") {
		if err := top.get("defaultErrnoRet", &errno); err != nil {
			return nil, nil, fmt.Errorf("upstream profile: defaultErrnoRet: %w", err)
		}
	}
	if action != "SCMP_ACT_ERRNO" || (errno != 1 && errno != 38) {
		return nil, nil, fmt.Errorf("upstream profile: default action %s (errno %d) would not refuse removed syscalls with EPERM or ENOSYS", action, errno)
	}
	var rules []object
	if err := top.get("syscalls", &rules); err != nil {
		return nil, nil, fmt.Errorf("upstream profile: syscalls: %w", err)
	}
	deny := Denied()
	var kept []object
	for i, rule := range rules {
		if err := rule.get("action", &action); err != nil {
			return nil, nil, fmt.Errorf("upstream profile: rule %d: action: %w", i, err)
		}
		if slices.Contains(denying, action) {
			kept = append(kept, rule)
			continue
		}
		if rule.has("name") {
			return nil, nil, fmt.Errorf("upstream profile: rule %d uses \"name\", which this program does not handle", i)
		}
		var names []string
		if err := rule.get("names", &names); err != nil {
			return nil, nil, fmt.Errorf("upstream profile: rule %d: names: %w", i, err)
		}
		left := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return slices.Contains(deny, n) })
		for _, n := range names {
			if slices.Contains(deny, n) && !slices.Contains(removed, n) {
				removed = append(removed, n)
			}
		}
		if len(left) == 0 {
			continue
		}
		if len(left) < len(names) {
			if err := rule.set("names", left); err != nil {
				return nil, nil, err
			}
		}
		kept = append(kept, rule)
	}
	if err := top.set("syscalls", kept); err != nil {
		return nil, nil, err
	}
	compact, err := json.Marshal(top)
	if err != nil {
		return nil, nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact, "", "\t"); err != nil {
		return nil, nil, err
	}
	out.WriteByte('\n')
	slices.Sort(removed)
	return out.Bytes(), removed, nil
}

// object is a JSON object that keeps its members in order, so that what
// Derive does not change comes out as it went in.
type object []member

type member struct {
	key string
	val json.RawMessage
}

func (o *object) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errors.New("not a JSON object")
	}
	*o = nil
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if o.has(key) {
			return fmt.Errorf("member %q appears twice", key)
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return err
		}
		*o = append(*o, member{key, val})
	}
	_, err := dec.Token()
	return err
}

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		key, err := json.Marshal(m.key)
		if err != nil {
			return nil, err
		}
		b.Write(key)
		b.WriteByte(':')
		b.Write(m.val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (o object) has(key string) bool {
	return slices.ContainsFunc(o, func(m member) bool { return m.key == key })
}

func (o object) get(key string, v any) error {
	for _, m := range o {
		if m.key == key {
			return json.Unmarshal(m.val, v)
		}
	}
	return errors.New("missing")
}

func (o object) set(key string, v any) error {
	val, err := json.Marshal(v)
	if err != nil {
		return err
	}
	for i := range o {
		if o[i].key == key {
			o[i].val = val
			return nil
		}
	}
	return fmt.Errorf("set %s: no such member", key)
}
