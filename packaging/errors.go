package packaging

import "errors"

var (
	// ErrBadDescribe: a version string is not in the form `git describe` prints for a vX.Y.Z tag.
	ErrBadDescribe = errors.New("not a git describe version of a vX.Y.Z tag")
	// ErrUnknownLibrary: a binary links a shared library that no installed package declares in its
	// shlibs file, so the package's dependency on it cannot be written.
	ErrUnknownLibrary = errors.New("shared library not provided by any installed package")
	// ErrNotELF: a binary to be packaged is not an ELF executable.
	ErrNotELF = errors.New("not an ELF executable")
)
