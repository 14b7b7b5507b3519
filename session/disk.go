package session

// DiskImage is the file, beside a BIND session's records, holding the file
// system mounted as its workspace when SESSION_DISK_MB is set.
const DiskImage = "workspace.img"
