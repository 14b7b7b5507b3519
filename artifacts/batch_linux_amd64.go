package artifacts

// sysSyncfs is the number of the syncfs system call, which package syscall
// does not define for amd64.
const sysSyncfs = 306
