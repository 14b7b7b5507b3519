//go:build !linux

package artifacts

import (
	"errors"
	"os"
)

// syncfsAvailable reports false: syncfs is Linux's, so a batch fsyncs each
// file and folder.
func syncfsAvailable() bool { return false }

func syncfs(*os.File) error { return errors.ErrUnsupported }
