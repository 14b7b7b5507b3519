package artifacts

import (
	"fmt"
	"os"
	"sync"
	"syscall"
)

// syncfsAvailable reports whether syncfs can stand in for the fsyncs of a
// batch's files: the kernel must report write-back errors to it (Linux 5.8
// and later; before, syncfs returned 0 whatever failed, and a blob whose
// content never reached the disk could get a final name), and the system
// call must not be blocked (by a seccomp filter, say).
var syncfsAvailable = sync.OnceValue(func() bool {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return false
	}
	var release []byte
	for _, c := range u.Release { // int8 or uint8, by architecture
		if c == 0 {
			break
		}
		release = append(release, byte(c))
	}
	var major, minor int
	if _, err := fmt.Sscanf(string(release), "%d.%d", &major, &minor); err != nil ||
		major < 5 || major == 5 && minor < 8 {
		return false
	}
	// An invalid descriptor fails with EBADF where the call exists, and
	// with ENOSYS or EPERM where it does not or is filtered out.
	_, _, errno := syscall.Syscall(sysSyncfs, ^uintptr(0), 0, 0)
	return errno == syscall.EBADF
})

// syncfs flushes the file system holding f to disk: the data and metadata of
// every file, its own and others'.
func syncfs(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(sysSyncfs, fd, 0, 0)
	}); err != nil {
		return err
	}
	if errno != 0 {
		return os.NewSyscallError("syncfs", errno)
	}
	return nil
}
