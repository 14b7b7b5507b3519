//go:build !amd64 && !386

package artifacts

import "syscall"

// sysSyncfs is the number of the syncfs system call.
const sysSyncfs = syscall.SYS_SYNCFS
