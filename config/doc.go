// Package config loads the operator settings of agentbox from environment
// variables and an optional .env file.
//
// A program calls Load once at start-up and hands the Config to the packages
// that need it (session.NewManager, the artifact server, the tools). Settings
// come, from strongest to weakest, from the process environment, the .env
// file, LangGraph-Sandbox's sandbox.env (both read with godotenv, never
// copied into the environment), and the defaults of Default. The variables
// LangGraph-Sandbox reads (SESSION_STORAGE, DATASET_ACCESS, SESSIONS_ROOT,
// BLOBSTORE_DIR, ARTIFACTS_DB, DATASETS_HOST_RO, SANDBOX_IMAGE,
// TMPFS_SIZE_MB) keep their names, meanings and defaults; its other names
// are read as agentbox's or named in Config.Notes (LangGraphVars), so its
// .env files work unchanged. example.env at the root of the module
// documents every variable, and Vars lists them.
//
// Loading is strict: a value that does not parse or is out of range is an
// error, never quietly replaced by a default, and a security setting is never
// weakened behind the operator's back (running as root needs its own
// switch). All bad variables are reported together, each as a *VarError
// whose message names the variable, the value and what would be accepted;
// the token secret is never echoed. Values are trimmed, and a blank value
// means the default.
//
// FromLookup is the core and reads nothing but its lookup function, the
// working directory (to make paths absolute) and, when local datasets are on,
// the dataset directory (to check it exists). Nothing here waits, so no call
// takes a context, and the package keeps no state: a Config is a plain value.
package config
