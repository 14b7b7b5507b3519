// Package tools describes agentbox to a language model: framework-neutral
// tool definitions (a name, a description written for the model, a JSON
// Schema of the input and a function to call) that an agent backend adapts
// to its own framework, whether LangChain, an OpenAI or Anthropic tool list,
// or a hand-written loop.
//
// New returns code_sandbox, list_datasets, select_dataset (only when the
// manager can select datasets: a tool that could only refuse is not
// offered) and export_dataset, plus list_artifacts when the manager can
// list a session's artifacts. Each tool finds the session of the
// conversation through Options.SessionKey.
//
// # Replies and errors
//
// A tool replies with text for the model. Whatever the model did wrong (input
// that is not JSON, wrong types, missing or unknown fields, empty code, a
// dataset that could not be loaded, a path outside /session) is explained in
// that text so the model can correct itself; a Python exception is reported
// the same way. A Go error means the system failed (engine unreachable,
// manager closed) and is for the backend, not the model. Every part of a
// reply (stdout, stderr, result, traceback, listings) is cut to
// Options.MaxReplyBytes, keeping its head and tail and saying how many bytes
// were cut, so a model never receives megabytes. Lists of artifacts are cut
// between entries instead, never inside a download URL, and say how many
// they left out. An exception is shown as Python prints it: the last frames
// of its traceback and its line ("ZeroDivisionError: division by zero")
// once.
//
// # Contexts
//
// Call waits for the work it starts and ends it when ctx ends; code still
// running is interrupted and its partial result reported. A deadline for the
// code itself comes from the model's timeout_s, bounded by
// Options.MaxTimeout. WithCallID passes the framework's tool-call id, so a
// retried call replays the recorded result instead of running code twice.
package tools
