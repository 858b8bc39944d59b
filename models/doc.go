// Package models is the model registry and its downloads: which speech
// models wsched can serve (the [[models.model]] entries of the
// configuration plus the whisper.cpp files ggml-NAME.bin found in
// [models] dir), and Pull, which fetches a whisper.cpp model into
// models_dir with resume and SHA-1 verification against whisper.cpp's
// published table.
package models

import "errors"

// Sentinel errors; errors returned by this package wrap them.
var (
	// ErrUnknownModel: the name is neither in the registry (Lookup) nor in
	// the catalog of downloadable models (Pull).
	ErrUnknownModel = errors.New("unknown model")
	// ErrUnavailable: the model is registered but cannot be served (its
	// file is missing or unreadable).
	ErrUnavailable = errors.New("model unavailable")
	// ErrNoProfile: no memory estimate exists for the model's backend.
	ErrNoProfile = errors.New("no memory profile for backend")
	// ErrChecksum: a downloaded file's SHA-1 differs from the published
	// one; the file has been deleted.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrTransfer: the download failed in a way a later attempt may not
	// (connection lost, short body, server error); the partial file is kept.
	ErrTransfer = errors.New("transfer failed")
	// ErrUnreachable: the model server could not be reached at all (name
	// not resolved, connection refused, no route); no attempt is retried.
	ErrUnreachable = errors.New("model server unreachable")
	// ErrHTTP: the server refused the download (a 4xx status).
	ErrHTTP = errors.New("download refused")
	// ErrBusy: another pull of the same model into the same directory holds
	// its partial file.
	ErrBusy = errors.New("another pull of this model is in progress")
)
