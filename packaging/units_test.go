package packaging

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestServiceHasIssueSettings checks the settings issue 7 asks for, one by one.
func TestServiceHasIssueSettings(t *testing.T) {
	svc := parseUnit(t, filepath.Join("systemd", "wsched.service"))
	want := map[string]string{
		"Type":                    "notify",
		"Restart":                 "on-failure",
		"User":                    "wsched",
		"Group":                   "wsched",
		"RuntimeDirectory":        "wsched",
		"StateDirectory":          "wsched wsched/models",
		"ConfigurationDirectory":  "wsched",
		"NoNewPrivileges":         "yes",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"DevicePolicy":            "closed",
		"RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
		"IPAddressDeny":           "any",
		"IPAddressAllow":          "localhost",
		"ProtectClock":            "yes",
		"RemoveIPC":               "yes",
		"SystemCallErrorNumber":   "EPERM",
		"LockPersonality":         "yes",
		"MemoryDenyWriteExecute":  "yes",
	}
	for key, value := range want {
		if got := svc.get("Service", key); got != value {
			t.Errorf("wsched.service %s=%q, want %q", key, got, value)
		}
	}
	if got := svc["Service"]["SystemCallFilter"]; !slices.Equal(got, []string{"@system-service", "~@privileged"}) {
		t.Errorf("SystemCallFilter= lines %q, want @system-service then ~@privileged", got)
	}
	// Settings that break the daemon (see the unit's comments): PrivateUsers= hides the clients' uids,
	// ProtectProc=/ProcSubset= the clients' processes and /proc/driver/nvidia.
	for _, key := range []string{"PrivateUsers", "ProtectProc", "ProcSubset", "PrivateDevices"} {
		if v := svc.get("Service", key); v != "" {
			t.Errorf("wsched.service sets %s=%s", key, v)
		}
	}
	if svc.get("Service", "WatchdogSec") == "" {
		t.Error("wsched.service has no WatchdogSec=")
	}
	if got := svc.words("Service", "SupplementaryGroups"); !slices.Equal(got, []string{"video", "render"}) {
		t.Errorf("SupplementaryGroups = %q, want video render", got)
	}
	// /dev/nvidiactl, /dev/nvidia-uvm(-tools), /dev/nvidia[0-9]* in the char-NAME form, old and new drivers.
	var devices []string
	for _, v := range svc["Service"]["DeviceAllow"] {
		devices = append(devices, strings.Fields(v)[0])
	}
	for _, d := range []string{"char-nvidia", "char-nvidiactl", "char-nvidia-frontend", "char-nvidia-uvm"} {
		if !slices.Contains(devices, d) {
			t.Errorf("DeviceAllow lacks %s (have %q)", d, devices)
		}
	}
}

// TestUnitsAgree checks that the units, the sysusers/tmpfiles snippets and the package layout name
// the same paths, users and groups.
func TestUnitsAgree(t *testing.T) {
	svc := parseUnit(t, filepath.Join("systemd", "wsched.service"))
	sock := parseUnit(t, filepath.Join("systemd", "wsched.socket"))
	listen := sock.get("Socket", "ListenStream")

	if got, want := path.Dir(listen), "/run/"+svc.get("Service", "RuntimeDirectory"); got != want {
		t.Errorf("socket %s is not in the service's RuntimeDirectory %s", listen, want)
	}
	if sock.get("Socket", "SocketGroup") != svc.get("Service", "Group") {
		t.Errorf("SocketGroup=%s, service Group=%s", sock.get("Socket", "SocketGroup"), svc.get("Service", "Group"))
	}
	exec := strings.Fields(svc.get("Service", "ExecStart"))
	if len(exec) < 4 || exec[0] != BinDir+"/wsched" || exec[1] != "serve" || exec[2] != "--config" || exec[3] != ConfigFile {
		t.Errorf("ExecStart=%q, want %s serve --config %s", exec, BinDir+"/wsched", ConfigFile)
	}
	env := svc.environment()
	if env["WSCHED_SOCKET"] != listen {
		t.Errorf("WSCHED_SOCKET=%q, socket unit listens on %q", env["WSCHED_SOCKET"], listen)
	}
	if want := "/var/lib/" + svc.words("Service", "StateDirectory")[0]; env["WSCHED_STATE_DIR"] != want {
		t.Errorf("WSCHED_STATE_DIR=%q, StateDirectory gives %q", env["WSCHED_STATE_DIR"], want)
	}
	if !slices.Contains(svc.words("Install", "Also"), "wsched.socket") ||
		!slices.Contains(sock.words("Install", "WantedBy"), "sockets.target") {
		t.Error("enabling wsched.service must enable wsched.socket, and the socket must be wanted by sockets.target")
	}

	sysusers := readLines(t, filepath.Join("sysusers.d", "wsched.conf"))
	wantUser := `u wsched - "wsched GPU memory placement daemon" /var/lib/wsched`
	if !slices.Contains(sysusers, wantUser) {
		t.Errorf("sysusers.d lacks %q", wantUser)
	}
	// SupplementaryGroups= must exist: declared here unless Debian's systemd declares them itself
	// (basic.conf), where a second declaration makes systemd-sysusers warn at every boot (issue 22).
	for _, g := range svc.words("Service", "SupplementaryGroups") {
		declared := slices.Contains(sysusers, "g "+g+" - -")
		if builtin := slices.Contains(basicConfGroups, g); declared == builtin {
			t.Errorf("group %s: declared in sysusers.d %v, declared by systemd's basic.conf %v; want exactly one", g, declared, builtin)
		}
	}
	tmpfiles := readLines(t, filepath.Join("tmpfiles.d", "wsched.conf"))
	wantDir := strings.Join([]string{"d", path.Dir(listen), svc.get("Service", "RuntimeDirectoryMode"),
		svc.get("Service", "User"), svc.get("Service", "Group"), "-"}, " ")
	if !slices.Contains(tmpfiles, wantDir) {
		t.Errorf("tmpfiles.d lacks %q (same directory, mode and owner as RuntimeDirectory=)", wantDir)
	}
}

// basicConfGroups are groups of SupplementaryGroups= that Debian 12's systemd declares in
// /usr/lib/sysusers.d/basic.conf (render is not: udev's postinst makes it).
var basicConfGroups = []string{"video"}

// readLines returns the lines of a snippet without comments and blank lines, spaces collapsed.
func readLines(t *testing.T, name string) []string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.Join(strings.Fields(l), " "); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}
