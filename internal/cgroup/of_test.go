package cgroup_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/cgroup"
)

// Of finds the group a process was started in (in the best hierarchy), and
// Remove runs OnRemove's functions, last added first, while the group's
// directory still exists.
func TestOfAndOnRemove(t *testing.T) {
	hs, err := cgroup.Hierarchies("/proc")
	if err != nil || len(hs) == 0 {
		t.Skipf("no cgroup hierarchy: %v", err)
	}
	m := managers(t)[0]
	if m.Hierarchy() != hs[0] {
		t.Skipf("the best hierarchy (%s %s) is not writable", hs[0].Version, hs[0].Mount)
	}
	g, err := m.New("of")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "300")
	if err := g.Start(cmd); err != nil {
		t.Fatal(err)
	}
	got, err := cgroup.Of("/proc", cmd.Process.Pid)
	if err != nil || got.Dir() != g.Dir() {
		t.Errorf("Of(%d) = %v, %v; want %s", cmd.Process.Pid, got.Dir(), err, g.Dir())
	}
	var order []string
	for _, name := range []string{"first", "second"} {
		g.OnRemove(func() {
			if _, err := os.Stat(g.Dir()); err != nil {
				t.Errorf("OnRemove %s: the group is gone already: %v", name, err)
			}
			order = append(order, name)
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := g.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if len(order) != 2 || order[0] != "second" || order[1] != "first" {
		t.Errorf("OnRemove ran %q, want second, first", order)
	}
}
