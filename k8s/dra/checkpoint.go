package dra

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// CheckpointFile is the driver's record of the claims it prepared, in
// PluginDir (as the kubelet's example DRA driver keeps its checkpoint.json):
// it survives a restart of the driver, not a reboot of the node's
// /var/lib/kubelet.
const CheckpointFile = "checkpoint.json"

// checkpointVersion is the format written; others are refused.
const checkpointVersion = 1

// ErrBadCheckpoint is a checkpoint file that cannot be trusted.
var ErrBadCheckpoint = errors.New("bad checkpoint")

// preparedClaim is one prepared claim as the checkpoint records it: what
// NodePrepareResources answered, and the daemon leases behind it.
type preparedClaim struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Results   []Result `json:"results"`
	// Leases are the lease IDs, one per result, in order.
	Leases []string `json:"leases"`
}

// checkpointFile is the file: the claims by UID and a checksum of them.
type checkpointFile struct {
	Version  int                      `json:"version"`
	Claims   map[string]preparedClaim `json:"claims"`
	Checksum string                   `json:"checksum"`
}

func checksum(claims map[string]preparedClaim) (string, error) {
	data, err := json.Marshal(claims) // map keys are sorted: stable
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// decodeCheckpoint parses a checkpoint file and checks its version, its
// checksum and that every claim has one lease per result.
func decodeCheckpoint(data []byte) (map[string]preparedClaim, error) {
	var f checkpointFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCheckpoint, err)
	}
	if f.Version != checkpointVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrBadCheckpoint, f.Version, checkpointVersion)
	}
	sum, err := checksum(f.Claims)
	if err != nil || sum != f.Checksum {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrBadCheckpoint)
	}
	for uid, c := range f.Claims {
		if uid == "" || len(c.Leases) != len(c.Results) {
			return nil, fmt.Errorf("%w: claim %q: %d leases for %d results", ErrBadCheckpoint, uid, len(c.Leases), len(c.Results))
		}
	}
	if f.Claims == nil {
		f.Claims = map[string]preparedClaim{}
	}
	return f.Claims, nil
}

// encodeCheckpoint is the file's content for claims.
func encodeCheckpoint(claims map[string]preparedClaim) ([]byte, error) {
	sum, err := checksum(claims)
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(checkpointFile{Version: checkpointVersion, Claims: claims, Checksum: sum}, "", "  ")
}

// loadCheckpoint reads path; a missing file is an empty record.
func loadCheckpoint(path string) (map[string]preparedClaim, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]preparedClaim{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}
	claims, err := decodeCheckpoint(data)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint %s: %w", path, err)
	}
	return claims, nil
}

// saveCheckpoint writes path atomically and durably: a crash leaves the
// old record or the new one.
func saveCheckpoint(path string, claims map[string]preparedClaim) error {
	data, err := encodeCheckpoint(claims)
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	if err := writeFileSync(path, data, 0o600); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	return nil
}

// writeFileSync writes data to path through a synced temporary file renamed
// over it, then syncs the directory.
func writeFileSync(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
