package artifacts

// sysSyncfs is the number of the syncfs system call, which package syscall
// does not define for 386.
const sysSyncfs = 344
