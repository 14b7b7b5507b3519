// Package docker is agentbox's only door to the Docker engine: it wraps the
// Docker SDK (github.com/docker/docker) behind plain Go types so that no SDK
// type leaks into the public packages, and so that a second driver never has
// to touch code outside its own folder.
//
// Calls that ask the engine a question take the caller's context; waits and
// streams (builds, pulls, exec streams) run as long as that context lives.
// Engine errors are classified by type (not found, connection failed), never by
// text, into the sentinels in errors.go.
//
// Driver (driver.go) is the session/driver.Driver over the engine, with
// every optional capability; it maps these sentinels onto the driver
// package's.
package docker
