package store

var bucketHost = []byte("host")

const keyBootID = "boot_id"

// BootID returns the kernel boot ID stored with the leases ("" when none
// was stored): leases stored under another boot ID outlived their holders.
func (d *DB) BootID() (string, error) {
	id, _, err := Get[string](d.db, bucketHost, keyBootID)
	return id, err
}

// SetBootID stores the boot ID the current leases were granted under.
func (d *DB) SetBootID(id string) error { return Put(d.db, bucketHost, keyBootID, id) }
