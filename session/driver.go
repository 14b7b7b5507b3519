package session

import "github.com/agentbox/agentbox/session/driver"

// Driver is what the Manager needs from a container engine: the
// session/driver package's Driver, under the name callers have always
// used. The Docker driver is the default (NewDockerDriver); another
// engine is one new implementation, proved by session/driver/drivertest.
type Driver = driver.Driver

// Image is a sandbox image as a Driver describes it.
type Image = driver.Image

// Mount is a host folder mounted into a container.
type Mount = driver.Mount

// Spec is a container to create. Every security setting is explicit, so a
// Driver has nothing to choose.
type Spec = driver.Spec

// Container is a container as a Driver describes it.
type Container = driver.Container

// CommandStream is a process's standard input (Write, CloseWrite) and
// output (Read), as a Driver's StreamCommand returns it.
type CommandStream = driver.Stream

// The optional capabilities of a Driver, under the names the Manager's
// code uses; each is documented in session/driver.
type (
	memoryReader    = driver.MemoryReader
	engineMemory    = driver.EngineMemory
	commandRunner   = driver.CommandRunner
	commandStreamer = driver.CommandStreamer
	execStreamer    = driver.ExecStreamer
	execStream      = driver.Stream
	fileReader      = driver.FileReader
	fileWriter      = driver.FileWriter
	fileRemover     = driver.FileRemover
	hostRooter      = driver.HostRooter
	pauser          = driver.Pauser
)
