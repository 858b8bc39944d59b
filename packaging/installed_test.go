package packaging

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstalledRoot checks a root the .deb was installed into (test/install-test.sh installs it with
// dpkg --root and sets WSCHED_TEST_ROOT): every path, user and group the installed units name exists
// there, and the socket is enabled.
func TestInstalledRoot(t *testing.T) {
	root := os.Getenv("WSCHED_TEST_ROOT")
	if root == "" {
		t.Skip("WSCHED_TEST_ROOT not set (test/install-test.sh sets it)")
	}
	in := func(p string) string { return filepath.Join(root, p) }
	svc := parseUnit(t, in(UnitDir+"/wsched.service"))
	sock := parseUnit(t, in(UnitDir+"/wsched.socket"))

	exec := strings.Fields(svc.get("Service", "ExecStart"))
	if fi, err := os.Stat(in(exec[0])); err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		t.Errorf("ExecStart binary %s: not an executable file in the root (%v)", exec[0], err)
	}
	if _, err := os.Stat(in(exec[3])); err != nil {
		t.Errorf("--config %s: %v", exec[3], err)
	}

	users, groups := readDB(t, in("/etc/passwd")), readDB(t, in("/etc/group"))
	user := users[svc.get("Service", "User")]
	switch {
	case len(user) < 7:
		t.Errorf("User=%s does not exist (or is not a passwd entry: %q)", svc.get("Service", "User"), user)
	case user[5] != "/var/lib/"+svc.words("Service", "StateDirectory")[0] || !strings.HasSuffix(user[6], "nologin"):
		t.Errorf("user %s: home %s, shell %s; want the StateDirectory and nologin", user[0], user[5], user[6])
	}
	wantGroups := append([]string{svc.get("Service", "Group"), sock.get("Socket", "SocketGroup")},
		svc.words("Service", "SupplementaryGroups")...)
	for _, g := range wantGroups {
		if groups[g] == nil {
			t.Errorf("group %s (named by the units) does not exist", g)
		}
	}

	// deb-systemd-helper enables without a running systemd; the link must reach the installed unit.
	link := in("/etc/systemd/system/sockets.target.wants/wsched.socket")
	target, err := os.Readlink(link)
	if err != nil {
		t.Fatalf("wsched.socket is not enabled: %v", err)
	}
	linked, err1 := filepath.EvalSymlinks(in(target))
	installed, err2 := filepath.EvalSymlinks(in(UnitDir + "/wsched.socket"))
	if err1 != nil || err2 != nil || linked != installed {
		t.Errorf("sockets.target.wants/wsched.socket → %s, not the installed unit (%v, %v)", target, err1, err2)
	}

	conffiles, err := os.ReadFile(in("/var/lib/dpkg/info/wsched.conffiles"))
	if err != nil || strings.TrimSpace(string(conffiles)) != ConfigFile {
		t.Errorf("dpkg's conffiles for wsched = %q (%v), want %s", conffiles, err, ConfigFile)
	}
}

// readDB reads /etc/passwd or /etc/group into name → fields.
func readDB(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	db := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) >= 4 { // group: name:x:gid:members; passwd: 7 fields
			db[fields[0]] = fields
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return db
}
