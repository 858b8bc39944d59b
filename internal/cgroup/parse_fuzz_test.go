package cgroup

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzParseCgroupFiles feeds /proc/self/mountinfo and /proc/self/cgroup
// text to the parsers: no panic, and every mount found is a cgroup mount
// whose directory came from the text.
func FuzzParseCgroupFiles(f *testing.F) {
	f.Add([]byte("39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n40 31 0:37 / /sys/fs/cgroup/unified\\040x rw - cgroup2 cgroup2 rw\n"),
		[]byte("8:pids:/a\n0::/system.slice/wsched.service\n"))
	f.Add([]byte("1 2 3 4 5 - cgroup2\n - \n\\\\\\0\n"), []byte("0::\n::\n1:a,b,c:/x:y\n"))
	f.Fuzz(func(t *testing.T, mountinfo, own []byte) {
		ms, err := parseMounts(bytes.NewReader(mountinfo))
		if err != nil {
			return // a line longer than the scanner's buffer
		}
		for _, m := range ms {
			if m.fstype != "cgroup" && m.fstype != "cgroup2" {
				t.Errorf("mount %+v is not a cgroup mount", m)
			}
			if m.controller != "" && m.controller != "pids" && m.controller != "freezer" {
				t.Errorf("mount %+v has controller %q", m, m.controller)
			}
		}
		for k, v := range parseOwn(own) {
			if strings.Contains(k, ",") || strings.Contains(k, "\n") || strings.Contains(v, "\n") {
				t.Errorf("own %q → %q", k, v)
			}
		}
	})
}
