package main

import (
	"io/fs"
	"os"
	"syscall"
)

// openNoFollow opens name in dir for reading with O_NOFOLLOW on the name
// itself (os.Root would follow a link that stays inside the folder) and
// O_NONBLOCK, so that a named pipe put there after the check cannot block.
func openNoFollow(_ *os.Root, dir *os.File, name string) (*os.File, error) {
	fd, err := syscall.Openat(int(dir.Fd()), name, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err == syscall.ELOOP {
		return nil, errSymlink
	}
	if err != nil {
		return nil, &fs.PathError{Op: "openat", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// ownerOf returns the user id owning the file fi describes.
func ownerOf(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
