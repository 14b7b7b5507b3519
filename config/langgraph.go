package config

import (
	"strconv"
	"strings"
)

// LangGraph-Sandbox (the Python project agentbox is the Go counterpart of)
// configures itself from a sandbox.env file and the environment. Most of
// its names are agentbox's too (baseSpecs); this file reads the rest, so
// that its .env files start agentbox with the meaning they have there:
// a name agentbox spells otherwise is read as agentbox's, a setting with no
// counterpart is named in Config.Notes, and one agentbox cannot honour is
// refused with what to set instead. Nothing here weakens a default: its
// Docker network settings, for one, do not give sessions a network.

// LangGraphEnvFile is the file LangGraph-Sandbox reads its settings from;
// Load reads it too, under .env.
const LangGraphEnvFile = "sandbox.env"

// langGraphImages are LangGraph-Sandbox's names for its sandbox image, which
// here means agentbox's (its own image has no kernel of ours).
var langGraphImages = map[string]bool{"sandbox:latest": true, "sandbox": true}

// langGraphAliases are LangGraph-Sandbox's names for settings agentbox
// reads under another name, with the same meaning and unit.
var langGraphAliases = []struct{ theirs, ours string }{
	{"ARTIFACTS_DB_PATH", "ARTIFACTS_DB"},
	{"ARTIFACTS_PUBLIC_BASE_URL", "ARTIFACT_PUBLIC_URL"},
	{"ARTIFACTS_TOKEN_TTL_SECONDS", "ARTIFACT_TOKEN_TTL_S"},
	{"ARTIFACTS_SECRET", "ARTIFACT_TOKEN_SECRET"},
	{"MAX_ARTIFACT_SIZE_MB", "ARTIFACT_MAX_FILE_MB"},
}

const (
	hybridLocalPath = "HYBRID_LOCAL_PATH"
	serverPort      = "ARTIFACTS_SERVER_PORT"
	cacheFilename   = "CACHE_FILENAME"
	// datasetCacheFile is the name BIND sessions keep dataset statuses in
	// (LangGraph-Sandbox's default CACHE_FILENAME).
	datasetCacheFile = "cache_datasets.json"
)

// langGraphUnneeded are LangGraph-Sandbox settings with no counterpart,
// and why none is needed.
var langGraphUnneeded = []struct{ name, why string }{
	{"SANDBOX_ADDRESS_STRATEGY", "agentbox reaches sessions through the engine, not over a network; sessions get the network SANDBOX_NETWORK names (none by default)"},
	{"COMPOSE_NETWORK", "agentbox reaches sessions through the engine, not over a network; to put sessions on a Docker network set SANDBOX_NETWORK"},
	{"HOST_GATEWAY", "agentbox reaches sessions through the engine, not over a network; sessions get the network SANDBOX_NETWORK names (none by default)"},
	{"IN_CHAT_URL", "agentbox's code tool always lists artifact download URLs in its reply (LangGraph-Sandbox's IN_CHAT_URL=true); results carry them apart too"},
}

// LangGraphVars lists the variables of LangGraph-Sandbox that agentbox
// reads besides Vars (whose LangGraph-Sandbox names are agentbox's own),
// each with what agentbox makes of it.
func LangGraphVars() []Var {
	var out []Var
	for _, a := range langGraphAliases {
		out = append(out, Var{Name: a.theirs, Help: "LangGraph-Sandbox's name for " + a.ours})
	}
	out = append(out,
		Var{Name: hybridLocalPath, Help: "LangGraph-Sandbox's folder of local datasets in HYBRID mode: DATASETS_HOST_RO when DATASET_ACCESS=HYBRID"},
		Var{Name: serverPort, Help: "LangGraph-Sandbox's artifact server port: ARTIFACT_SERVER_ADDR=:PORT, and ARTIFACT_PUBLIC_URL=http://localhost:PORT unless set"},
		Var{Name: cacheFilename, Default: datasetCacheFile, Help: "LangGraph-Sandbox's dataset cache file name; agentbox always writes " + datasetCacheFile},
	)
	for _, u := range langGraphUnneeded {
		out = append(out, Var{Name: u.name, Help: "not needed: " + u.why})
	}
	return out
}

// langGraphReader wraps a lookup so that agentbox's variables read
// LangGraph-Sandbox's names where agentbox's are unset, and collects what
// loading should say about them.
type langGraphReader struct {
	lookup func(string) (string, bool)
	// from maps one of agentbox's names to the LangGraph-Sandbox variable
	// its value came from, and the value as written there, so that a bad
	// value is reported under the name the operator wrote.
	from  map[string]langGraphSource
	notes []string
	errs  map[string][]*VarError // by agentbox's name, for the order of Vars
}

type langGraphSource struct{ name, value string }

func newLangGraphReader(lookup func(string) (string, bool)) *langGraphReader {
	return &langGraphReader{lookup: lookup, from: map[string]langGraphSource{}, errs: map[string][]*VarError{}}
}

// get is lookup with blank values as unset, trimmed.
func (r *langGraphReader) get(name string) (string, bool) {
	v, ok := r.lookup(name)
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

// read prepares every variable; it runs once, before the specs are read.
func (r *langGraphReader) read() map[string]string {
	vals := map[string]string{} // agentbox's name -> value taken from LangGraph-Sandbox's
	adopt := func(ours, theirs, theirValue, value string) {
		if v, ok := r.get(ours); ok {
			if v != value {
				e := &VarError{Name: theirs, Value: theirValue,
					Want: "unset, or the value of " + ours + " (" + theirs + " is LangGraph-Sandbox's name for it, and both are set)"}
				if ours == "ARTIFACT_TOKEN_SECRET" {
					e.Secret, e.Value = true, redacted(theirValue) // VarError shows Value as it is
				}
				r.errs[ours] = append(r.errs[ours], e)
			}
			return
		}
		vals[ours] = value
		r.from[ours] = langGraphSource{theirs, theirValue}
	}
	for _, a := range langGraphAliases {
		if v, ok := r.get(a.theirs); ok {
			adopt(a.ours, a.theirs, v, v)
		}
	}

	access, _ := r.get("DATASET_ACCESS")
	if p, ok := r.get(hybridLocalPath); ok {
		if DatasetAccess(strings.ToUpper(access)) == AccessHybrid {
			adopt("DATASETS_HOST_RO", hybridLocalPath, p, p)
		} else {
			r.notes = append(r.notes, hybridLocalPath+" is read only when DATASET_ACCESS=HYBRID, as in LangGraph-Sandbox; LOCAL_RO reads DATASETS_HOST_RO")
		}
	}

	if port, ok := r.get(serverPort); ok {
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			r.errs["ARTIFACT_SERVER_ADDR"] = append(r.errs["ARTIFACT_SERVER_ADDR"], &VarError{Name: serverPort, Value: port,
				Want: "a port from 0 to 65535 (LangGraph-Sandbox's artifact server port; agentbox's setting is ARTIFACT_SERVER_ADDR)"})
		} else {
			adopt("ARTIFACT_SERVER_ADDR", serverPort, port, ":"+port)
			if _, ok := r.get("ARTIFACTS_PUBLIC_BASE_URL"); !ok {
				if _, ok := r.get("ARTIFACT_PUBLIC_URL"); !ok {
					vals["ARTIFACT_PUBLIC_URL"] = "http://localhost:" + port
					r.from["ARTIFACT_PUBLIC_URL"] = langGraphSource{serverPort, port}
				}
			}
		}
	}

	if name, ok := r.get(cacheFilename); ok && name != datasetCacheFile {
		r.errs["DATASET_CACHE_SCOPE"] = append(r.errs["DATASET_CACHE_SCOPE"], &VarError{Name: cacheFilename, Value: name,
			Want: datasetCacheFile + ", the only name agentbox writes dataset statuses under in BIND mode (or unset)"})
	}

	if img, ok := r.get("SANDBOX_IMAGE"); ok && langGraphImages[img] {
		vals["SANDBOX_IMAGE"] = Default().SandboxImage
		r.notes = append(r.notes, "SANDBOX_IMAGE="+img+" is LangGraph-Sandbox's image name: agentbox runs its own sandbox image, "+
			Default().SandboxImage+" (build it with sandbox-setup; set SANDBOX_IMAGE to it to silence this note)")
	}

	for _, u := range langGraphUnneeded {
		if v, ok := r.get(u.name); ok {
			r.notes = append(r.notes, u.name+"="+v+" is LangGraph-Sandbox's and not needed: "+u.why)
		}
	}
	return vals
}

// wrap returns the lookup FromLookup reads agentbox's names through.
func (r *langGraphReader) wrap() func(string) (string, bool) {
	vals := r.read()
	return func(name string) (string, bool) {
		if v, ok := vals[name]; ok {
			return v, true
		}
		return r.lookup(name)
	}
}

// rename reports e, about agentbox's variable, under the LangGraph-Sandbox
// name its value came from, if it came from one.
func (r *langGraphReader) rename(e *VarError) *VarError {
	src, ok := r.from[e.Name]
	if !ok {
		return e
	}
	out := *e
	out.Name, out.Value = src.name, src.value
	if out.Secret {
		out.Value = redacted(src.value)
	}
	out.Want = e.Want + " (" + src.name + " is read as " + e.Name + ")"
	return &out
}
