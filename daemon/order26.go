package daemon

// gpuModel is NVML's name of the GPU with this UUID in the engine's view
// ("" if unknown): real-time factors are learned per GPU model.
func (d *Daemon) gpuModel(uuid string) string {
	accts, _ := d.eng.Accounts()
	for _, a := range accts {
		if a.UUID == uuid {
			return a.Name
		}
	}
	return ""
}
